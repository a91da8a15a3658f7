"""Sliding windows over the trailing 1-3 spatial dims, shared by convolution and pooling.

`Taps` lays the padded input out so that every kernel tap is a contiguous run: for tap t,
`Taps.run` gives a block of rows as one 1-D slice whose element ``i * pitch + q`` is the
value tap t meets in row i's output window at flat position ``q``, where output position
``(o1, o2, ...)`` sits at ``q = o1 * Q1 + o2 * Q2 + ...`` (the Q are the strides of a row of
the padded input). The positions between output rows are filler that `Taps.grid` skips.
NumPy's ufuncs and copies run several times faster over such runs than over 2-D or
(OH, OW)-shaped views. With a stride above 1 the padded input is first split into its
stride phases (rows r with the same r % stride together), so that every tap still reads
a contiguous run.

`scatter_taps` is the adjoint (col2im): it adds per-tap planes back into the input grid.

`Taps` and `scatter_taps` allocate their arrays with ``allocate(shape, dtype)``: fresh arrays
here; the optimized kernels pass their per-call scratch memory
(`torchedge.kernels.optimized.scratch`), whose pages are reused from call to call.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["output_size", "Taps", "scatter_taps", "row_blocks", "rows_view"]

_BLOCK_ELEMENTS = 1 << 15  # a working set of a few such blocks stays in L2


def output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool = False) -> int:
    """ATen's pooling/convolution output length, including the ceil_mode rule that the
    last window must start inside the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    n = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (n - 1) * stride >= size + pad:
        n -= 1
    return n


def row_blocks(rows: int, length: int, elements: int = _BLOCK_ELEMENTS) -> list:
    """Slices over ``rows`` whose (block, length) arrays have about ``elements`` items, so
    that a few of them fit in the cache together."""
    step = max(1, elements // max(length, 1))
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]


def rows_view(out: np.ndarray, shape: tuple):
    """``out`` reshaped to ``shape`` as a view, or None when that would need a copy."""
    view = out.reshape(shape)
    return view if out.size == 0 or np.may_share_memory(view, out) else None


@dataclass(frozen=True)
class _Layout:
    """Where every tap of a window geometry reads, computed once per geometry."""

    phase: tuple  # per-dim length of a stride phase (the padded input, rounded up to strides)
    strides: tuple  # element strides of the output grid in a phase row
    pitch: int  # elements of one row of a phase
    length: int  # elements from a row's first to its last window
    offsets: tuple  # (phase, start) of every tap
    plain: bool  # the input itself serves as the only phase (unit stride, no padding)
    copies: tuple  # (phase, target, source) index tuples filling the phases from the input
    borders: tuple  # (phase, index) slabs of padding


@functools.lru_cache(maxsize=512)
def _layout(size, kernel, stride, padding, dilation, out_size) -> _Layout:
    phase = tuple(-(-((o - 1) * s + d * (k - 1) + 1) // s) for o, s, d, k in zip(out_size, stride, dilation, kernel))
    plain = all(s == 1 for s in stride) and not any(padding) and all(p <= n for p, n in zip(phase, size))
    if plain:
        phase = size
    strides = tuple(math.prod(phase[d + 1 :]) for d in range(len(kernel)))
    length = sum((o - 1) * q for o, q in zip(out_size, strides)) + 1 if min(out_size, default=1) > 0 else 0
    offsets = []
    for tap in itertools.product(*(range(k) for k in kernel)):
        reach = [t * d for t, d in zip(tap, dilation)]
        which = int(np.ravel_multi_index([r % s for r, s in zip(reach, stride)], stride))
        offsets.append((which, sum(r // s * q for r, s, q in zip(reach, stride, strides))))
    copies, borders = [], []
    for which, residues in enumerate(itertools.product(*(range(s) for s in stride))):
        target, source = [slice(None)], [slice(None)]
        for d, (r, s, p, n, length_d) in enumerate(zip(residues, stride, padding, size, phase)):
            first = min(length_d, max(0, -(-(p - r) // s)))  # first phase row holding an input row
            stop = max(first, min(length_d, -(-(n + p - r) // s)))
            edge = (slice(None),) * (d + 1)
            borders += [
                (which, edge + (cut,))
                for cut, empty in ((slice(0, first), first == 0), (slice(stop, None), stop == length_d))
                if not empty
            ]
            target.append(slice(first, stop))
            start = first * s + r - p
            source.append(slice(start, start + (stop - first - 1) * s + 1, s) if stop > first else slice(0, 0))
        copies.append((which, tuple(target), tuple(source)))
    return _Layout(
        tuple(phase), strides, math.prod(phase), length, tuple(offsets), plain, tuple(copies), tuple(borders)
    )


class Taps:
    """Kernel taps of ``x`` (*batch, *spatial), padded with ``value`` and cast to ``dtype``.

    ``rows`` is the product of the batch dims; taps are numbered in row-major kernel order
    (ATen's visiting order). Every row is laid out with the same ``pitch``; `run` serves a
    block of rows as one contiguous 1-D run (NumPy's ufuncs are several times faster over
    those than over 2-D views), whose element ``i * pitch + q`` belongs to row i.
    """

    def __init__(
        self, x, kernel, stride, padding, dilation, out_size, value=0, dtype=None, allocate: Callable = np.empty
    ):
        dims = len(kernel)
        self.dtype = x.dtype if dtype is None else np.dtype(dtype)
        self.kernel, self.out_size = tuple(kernel), tuple(out_size)
        self.rows = math.prod(x.shape[:-dims])
        size = tuple(x.shape[-dims:])
        layout = _layout(size, self.kernel, tuple(stride), tuple(padding), tuple(dilation), self.out_size)
        self.strides, self.pitch, self._offsets = layout.strides, layout.pitch, layout.offsets
        self.length = layout.length if self.rows else 0
        if layout.plain and self.dtype == x.dtype and x.flags.c_contiguous:  # read the input in place
            self._source = x.reshape(1, -1)
        else:
            x = x.reshape((self.rows,) + size)
            phases = allocate((math.prod(stride), self.rows) + layout.phase, self.dtype)
            for which, index in layout.borders:
                phases[which][index] = value
            for which, target, source in layout.copies:
                np.copyto(phases[which][target], x[source], casting="unsafe")
            self._source = phases.reshape(len(phases), -1)
        self._source.flags.writeable = False

    @property
    def count(self) -> int:
        return len(self._offsets)

    def run_length(self, rows: slice) -> int:
        """Length of `run` over ``rows``: whole pitches, the last row cut after its last window."""
        return (rows.stop - rows.start - 1) * self.pitch + self.length

    def run(self, tap: int, rows: slice) -> np.ndarray:
        """Read-only 1-D run of the values tap ``tap`` meets over the given rows."""
        which, start = self._offsets[tap]
        begin = rows.start * self.pitch + start
        return self._source[which, begin : begin + self.run_length(rows)]

    def flat(self, tap: int, extra: int = 0) -> np.ndarray:
        """Read-only (rows, length + extra) view of the values tap ``tap`` meets, and the
        ``extra`` after them (those of a later tap in the same phase, which stay in bounds)."""
        which, start = self._offsets[tap]
        return self._source[which].reshape(self.rows, self.pitch)[:, start : start + self.length + extra]

    def grid(self, buffer: np.ndarray) -> np.ndarray:
        """The (rows, *out_size) view of a (rows, >= pitch) buffer with unit inner stride, or of
        a contiguous 1-D buffer laid out like a `run`."""
        rows, pitch = (
            (buffer.shape[0], buffer.strides[0])
            if buffer.ndim == 2
            else (-(-buffer.size // self.pitch), self.pitch * buffer.itemsize)
        )
        return np.lib.stride_tricks.as_strided(
            buffer, (rows,) + self.out_size, (pitch,) + tuple(q * buffer.itemsize for q in self.strides)
        )

    def blocks(self) -> list:
        return row_blocks(self.rows, self.pitch)


def scatter_taps(planes, size, kernel, stride, padding, dilation, dtype, allocate: Callable = np.empty) -> np.ndarray:
    """Adjoint of `Taps`: a zeroed (rows, *size) array plus, for each tap t, ``planes(t)``
    (rows, *grid) added at the input positions ``grid * stride - padding + t * dilation``
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
