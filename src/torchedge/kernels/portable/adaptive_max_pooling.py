"""Adaptive max pooling, 2-d and 3-d, with ATen's indices: output cell i takes the maximum of
input cells floor(i*N/O) .. ceil((i+1)*N/O) along each spatial dim.

As in ATen, each index is the flat position within the input's (spatial) plane; a window
is scanned in row-major order keeping the first maximum, and a NaN replaces the maximum
whenever it is met, so the last NaN of a window wins. All windows are gathered at once,
padded to the longest window with cells that cannot win.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from torchedge.kernels.dtypes import INT64, is_floating
from torchedge.kernels.portable.adaptive_pooling import adaptive_bounds
from torchedge.kernels.portable.common import check, pair, quiet, write
from torchedge.kernels.portable.pooling_geometry import batched, check_input, check_nonempty
from torchedge.kernels.registry import register_kernel

__all__ = ["adaptive_max_pool", "adaptive_max_pool2d", "adaptive_max_pool3d"]


def _windows(size: int, out_size: int):
    """(out_size, K) input positions of each window padded to the longest K, and their validity."""
    start, stop = adaptive_bounds(size, out_size)
    longest = int((stop - start).max()) if out_size > 0 else 1
    taps = np.arange(max(longest, 1))
    positions = start[:, None] + taps[None, :]
    valid = taps[None, :] < (stop - start)[:, None]
    return np.minimum(positions, size - 1), valid


def _gather(x: np.ndarray, size: tuple):
    """Windows of the last ``len(size)`` dims of ``x`` as (..., *size, K); their flat
    positions in the input plane (*size, K) and validity (*size, K)."""
    dims = len(size)
    spatial = x.shape[-dims:]
    strides = [math.prod(spatial[d + 1 :]) for d in range(dims)]
    index, flat, valid = [], np.zeros((1,) * (2 * dims), INT64), np.ones((1,) * (2 * dims), bool)
    for d in range(dims):
        positions, ok = _windows(spatial[d], size[d])
        shape = [1] * (2 * dims)
        shape[d], shape[dims + d] = positions.shape
        index.append(positions.reshape(shape))
        flat = flat + positions.reshape(shape) * strides[d]
        valid = valid & ok.reshape(shape)
    windows = x[(Ellipsis, *index)]  # (..., O0, O1, [O2], K0, K1, [K2])
    lead = windows.shape[: x.ndim - dims]
    taps = math.prod(windows.shape[-dims:])
    full = tuple(size) + (taps,)
    flat = np.broadcast_to(flat, windows.shape[-2 * dims :]).reshape(full)
    valid = np.broadcast_to(valid, windows.shape[-2 * dims :]).reshape(full)
    return windows.reshape(lead + full), flat, valid


def adaptive_max_pool(op: str, dims: int, self, output_size, out, indices) -> None:
    x, out, indices = batched(op, self, dims, out, indices)
    check(is_floating(x.dtype), op, f"adaptive max pooling is not implemented for {x.dtype}")
    check_nonempty(op, x, dims)
    size = pair(output_size, dims, "output_size", op)
    check(min(size) >= 0, op, f"output_size {list(size)} must not be negative")
    check(indices.dtype == INT64, op, f"indices must be int64, got {indices.dtype}")
    if out.size == 0:
        return
    windows, flat, valid = _gather(x, size)
    with quiet():
        values = np.where(valid, windows, x.dtype.type(-np.inf))
        nan = np.isnan(values)
        taps = values.shape[-1]
        last_nan = taps - 1 - np.argmax(nan[..., ::-1], axis=-1)
        first_max = np.argmax(np.where(nan, x.dtype.type(-np.inf), values), axis=-1)
    pick = np.where(nan.any(axis=-1), last_nan, first_max)[..., None]
    write(out, np.take_along_axis(values, pick, axis=-1)[..., 0])
    positions = np.broadcast_to(flat, values.shape)
    write(indices, np.take_along_axis(positions, pick, axis=-1)[..., 0])


def _shape(dims: int, op: str, self, output_size, out, indices) -> list[tuple]:
    check_input(op, dims, self)
    size = pair(output_size, dims, "output_size", op)
    shape = self.shape[:-dims] + tuple(size)
    return [shape, shape]


@register_kernel("aten::adaptive_max_pool2d.out", shape=functools.partial(_shape, 2))
def adaptive_max_pool2d(self, output_size, out, indices):
    adaptive_max_pool("aten::adaptive_max_pool2d.out", 2, self, output_size, out, indices)


@register_kernel("aten::adaptive_max_pool3d.out", shape=functools.partial(_shape, 3))
def adaptive_max_pool3d(self, output_size, out, indices):
    adaptive_max_pool("aten::adaptive_max_pool3d.out", 3, self, output_size, out, indices)
