"""Sliding windows over the trailing 1-3 spatial dims, shared by convolution and pooling.

`output_size` is ATen's window count; `scatter_taps` adds per-tap planes back into the input
grid (col2im, the adjoint of gathering the taps), allocating its result with
``allocate(shape, dtype)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

__all__ = ["output_size", "scatter_taps"]


def output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool = False) -> int:
    """ATen's pooling/convolution output length, including the ceil_mode rule that the
    last window must start inside the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    n = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (n - 1) * stride >= size + pad:
        n -= 1
    return n


def scatter_taps(planes, size, kernel, stride, padding, dilation, dtype, allocate: Callable = np.empty) -> np.ndarray:
    """Adjoint of gathering the kernel taps (col2im): a zeroed (rows, *size) array plus, for
    each tap t, ``planes(t)`` (rows, *grid) added at the input positions ``grid * stride - padding + t * dilation``
    (positions in the padding are dropped before anything is added, so the padding costs
    nothing). The result comes from ``allocate(shape, dtype)``."""
    first = planes(0)
    grid = first.shape[1:]
    total = allocate((first.shape[0],) + tuple(size), dtype)
    total.fill(0)
    for t, tap in enumerate(itertools.product(*(range(k) for k in kernel))):
        spans = [_inside(i * d - p, g, s, n) for i, d, p, g, s, n in zip(tap, dilation, padding, grid, stride, size)]
        if all(lo < hi for lo, hi, _ in spans):
            plane = first if t == 0 else planes(t)
            target = tuple(slice(at, at + (hi - lo - 1) * s + 1, s) for (lo, hi, at), s in zip(spans, stride))
            source = tuple(slice(lo, hi) for lo, hi, _ in spans)
            total[(slice(None),) + target] += plane[(slice(None),) + source]
    return total


def _inside(offset: int, grid: int, stride: int, size: int) -> tuple[int, int, int]:
    """(lo, hi, at): the grid positions g in [lo, hi) put ``g * stride + offset`` inside
    [0, size), the first of them at ``at``."""
    lo = min(grid, max(0, -(offset // stride)))
    hi = max(lo, min(grid, -(-(size - offset) // stride)))
    return lo, hi, lo * stride + offset
