"""Fractional max pooling, 2-d and 3-d, given its random samples (so deterministic).

Along each spatial dim, output cell i reads ``pool`` input cells from ``start[i]``, where,
with ``alpha = (size - pool) / (out - 1)`` and ``u`` the plane's sample for that dim,
``start[i] = trunc((i + u) * alpha) - trunc(u * alpha)`` and the last cell starts at
``size - pool``. As in ATen this arithmetic runs in the input's dtype (float16 and
bfloat16 round after each operation), so the windows match it exactly. The samples are
(N, C, dims): sample 0 sets the width's windows in 2-d and the time's in 3-d (then height,
width). Windows are scanned in row-major order keeping the first maximum; a NaN replaces
the maximum whenever it is met (the last NaN wins); an empty window gives -inf and its
first position. Indices are flat positions in the input plane.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from torchedge.kernels.dtypes import INT64, is_floating
from torchedge.kernels.portable.common import check, fail, pair, quiet, write
from torchedge.kernels.portable.pooling_geometry import batched, check_input
from torchedge.kernels.registry import register_kernel

__all__ = ["fractional_max_pool", "fractional_max_pool2d", "fractional_max_pool3d", "interval_starts"]

_DIM_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}


def interval_starts(samples: np.ndarray, size: int, out_size: int, pool: int) -> np.ndarray:
    """(..., out_size) window starts for the samples (...,), computed in the samples' dtype."""
    starts = np.empty(samples.shape + (out_size,), INT64)
    if out_size == 0:
        return starts
    kind = samples.dtype.type
    if out_size > 1:
        with quiet():
            alpha = kind(size - pool) / kind(out_size - 1)
            steps = np.arange(out_size - 1).astype(samples.dtype)
            moved = (steps + samples[..., None]) * alpha
            base = (samples * alpha)[..., None]
            starts[..., :-1] = moved.astype(INT64) - base.astype(INT64)
    starts[..., -1] = size - pool
    return starts


def _check_output_size(op: str, size: tuple) -> None:
    if min(size) < 0:
        fail(op, f"output_size {list(size)} must not be negative")


def _check_geometry(op: str, dims: int, x, kernel: tuple, size: tuple) -> None:
    names = _DIM_NAMES[dims]
    check(min(kernel) >= 0, op, f"kernel_size {list(kernel)} must not be negative")
    _check_output_size(op, size)
    spatial = x.shape[-dims:]
    strict = dims == 3  # ATen's 3-d check leaves one cell spare, its 2-d check does not
    for name, n, k, o in zip(names, spatial, kernel, size):
        check(
            o + k - 1 < n if strict else o + k - 1 <= n,
            op,
            f"pool {name} {k} too large relative to input {name} {n} (output {name} {o})",
        )


def _check_samples(op: str, dims: int, x, samples) -> None:
    check(samples.dtype == x.dtype, op, f"random_samples must have the input's dtype {x.dtype}, got {samples.dtype}")
    check(samples.ndim == 3, op, f"random_samples must have 3 dims, got shape {list(samples.shape)}")
    check(samples.shape[2] == dims, op, f"random_samples.size(2) must be {dims}, got {samples.shape[2]}")
    check(samples.shape[0] >= x.shape[0], op, f"random_samples.size(0) must be at least the batch size {x.shape[0]}")
    check(samples.shape[1] == x.shape[1], op, f"random_samples.size(1) must be the channel count {x.shape[1]}")


def _positions(starts: list, kernel: tuple, spatial: tuple):
    """Per-dim window positions broadcastable to (N, C, *out, *kernel), and their flat plane positions."""
    dims = len(kernel)
    out = tuple(s.shape[-1] for s in starts)
    index, flat = [], np.zeros((1,), INT64)
    for d in range(dims):
        positions = starts[d][..., :, None] + np.arange(kernel[d])  # (N, C, O_d, K_d)
        shape = positions.shape[:2]
        shape += tuple(out[d] if e == d else 1 for e in range(dims))
        shape += tuple(kernel[d] if e == d else 1 for e in range(dims))
        positions = positions.reshape(shape)
        index.append(positions)
        flat = flat + positions * math.prod(spatial[d + 1 :])
    return index, flat


def _per_dim_starts(op: str, x, samples, kernel: tuple, size: tuple) -> list:
    dims = len(kernel)
    spatial = x.shape[-dims:]
    planes = samples[: x.shape[0]]
    order = (1, 0) if dims == 2 else (0, 1, 2)  # which sample sets each spatial dim's windows
    starts = [interval_starts(planes[..., order[d]], spatial[d], size[d], kernel[d]) for d in range(dims)]
    inside = all(((s >= 0) & (s <= n - k)).all() for s, n, k in zip(starts, spatial, kernel))
    check(inside, op, "random_samples must lie in [0, 1): their windows leave the input")
    return starts


def fractional_max_pool(op: str, dims: int, self, kernel_size, output_size, random_samples, output, indices) -> None:
    x, output, indices = batched(op, self, dims, output, indices)
    check(is_floating(x.dtype), op, f"fractional max pooling is not implemented for {x.dtype}")
    check(
        0 not in x.shape[1:],
        op,
        f"expected an input with non-empty dims other than the batch dim, got shape {list(self.shape)}",
    )
    kernel = pair(kernel_size, dims, "kernel_size", op)
    size = pair(output_size, dims, "output_size", op)
    samples = random_samples if self.ndim == dims + 2 else random_samples[:1]
    _check_samples(op, dims, x, samples)
    _check_geometry(op, dims, x, kernel, size)
    check(indices.dtype == INT64, op, f"indices must be int64, got {indices.dtype}")
    if output.size == 0:
        return
    starts = _per_dim_starts(op, x, samples, kernel, size)
    n, c = x.shape[:2]
    taps = math.prod(kernel)
    full = (n, c) + size + (max(taps, 1),)
    if taps == 0:  # empty windows: -inf at the window's first position
        ones = (1,) * dims
        _, flat = _positions(starts, ones, x.shape[-dims:])
        write(output, np.full(output.shape, -np.inf, output.dtype))
        write(indices, np.broadcast_to(flat, (n, c) + size + ones).reshape(full)[..., 0])
        return
    index, flat = _positions(starts, kernel, x.shape[-dims:])
    batch = np.arange(n).reshape((n,) + (1,) * (2 * dims + 1))
    channel = np.arange(c).reshape((1, c) + (1,) * (2 * dims))
    windows = x[(batch, channel, *index)].reshape(full)  # (N, C, *out, K)
    flat = np.broadcast_to(flat, (n, c) + size + kernel).reshape(full)
    with quiet():
        nan = np.isnan(windows)
        last_nan = taps - 1 - np.argmax(nan[..., ::-1], axis=-1)
        first_max = np.argmax(np.where(nan, x.dtype.type(-np.inf), windows), axis=-1)
    pick = np.where(nan.any(axis=-1), last_nan, first_max)[..., None]
    write(output, np.take_along_axis(windows, pick, axis=-1)[..., 0])
    write(indices, np.take_along_axis(flat, pick, axis=-1)[..., 0])


def _shape(dims: int, op: str, self, kernel_size, output_size, random_samples, output, indices) -> list[tuple]:
    check_input(op, dims, self)
    size = pair(output_size, dims, "output_size", op)
    _check_output_size(op, size)
    shape = self.shape[:-dims] + tuple(size)
    return [shape, shape]


@register_kernel("aten::fractional_max_pool2d.output", shape=functools.partial(_shape, 2))
def fractional_max_pool2d(self, kernel_size, output_size, random_samples, output, indices):
    fractional_max_pool(
        "aten::fractional_max_pool2d.output", 2, self, kernel_size, output_size, random_samples, output, indices
    )


@register_kernel("aten::fractional_max_pool3d.output", shape=functools.partial(_shape, 3))
def fractional_max_pool3d(self, kernel_size, output_size, random_samples, output, indices):
    fractional_max_pool(
        "aten::fractional_max_pool3d.output", 3, self, kernel_size, output_size, random_samples, output, indices
    )
