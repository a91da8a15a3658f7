"""2-d and 3-d pooling: max (with ATen's indices), average, adaptive average.

Window reductions run over the flat tap views of `Taps`, block by block, so every ufunc
call streams long contiguous runs that stay in the cache.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, pair, quiet, write
from torchedge.kernels.portable.windows import Taps, output_size, rows_view, workspace
from torchedge.kernels.registry import register_kernel

__all__ = ["max_pool_with_indices", "avg_pool", "adaptive_avg_pool", "pool_geometry", "averaging_matrix",
           "pool_divisors", "separable_matmul", "matmul_along", "batched", "register_dims"]


def register_dims(op: str, impl, dims: int):
    """Register ``impl(op, dims, *schema arguments)`` as the kernel of ``op``."""
    return register_kernel(op)(functools.partial(impl, op, dims))


def batched(op, x, dims, *outs):
    """Unbatched (C, *spatial) inputs and their outs gain a batch dim; returns the views."""
    check(x.ndim in (dims + 1, dims + 2), op, f"expected a {dims + 1}-D or {dims + 2}-D input, got shape "
                                              f"{list(x.shape)}")
    return (x, *outs) if x.ndim == dims + 2 else (x[None], *(o[None] for o in outs))


def pool_geometry(op, x, dims, kernel_size, stride, padding, dilation, ceil_mode):
    """Checked (kernel, stride, padding, dilation, output size) of a pooling window."""
    kernel = pair(kernel_size, dims, "kernel_size", op)
    stride = pair(stride, dims, "stride", op) if len(stride) else kernel
    padding = pair(padding, dims, "padding", op)
    dilation = pair(dilation, dims, "dilation", op)
    check(min(kernel) > 0 and min(stride) > 0 and min(dilation) > 0 and min(padding) >= 0, op,
          f"kernel_size {list(kernel)}, stride {list(stride)} and dilation {list(dilation)} must be positive")
    check(all(2 * p <= d * (k - 1) + 1 for p, k, d in zip(padding, kernel, dilation)), op,
          f"padding {list(padding)} must be at most half of the (dilated) kernel size {list(kernel)}")
    size = tuple(output_size(*args, ceil_mode) for args in zip(x.shape[-dims:], kernel, stride, padding, dilation))
    check(min(size) > 0, op, f"the output size {list(size)} is too small for input {list(x.shape)}")
    return kernel, stride, padding, dilation, size


def max_pool_with_indices(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices):
    """Max over each window; indices are flat offsets into the input's spatial dims.

    The result follows ATen's rule (visit taps in order, take one that is larger, or nan):
    ties keep the first tap, several nans the last one, and a window whose values are all
    the lowest value (-inf) points at its first in-bounds tap (padding is never taken).
    """
    x, out, indices = batched(op, self, dims, out, indices)
    check(category(x.dtype) >= 1, op, f"max pooling is not implemented for {x.dtype}")
    kernel, stride, padding, dilation, size = pool_geometry(op, x, dims, kernel_size, stride, padding, dilation,
                                                            ceil_mode)
    check(out.shape[-dims:] == size, op, f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}")
    if out.size == 0:
        return
    acc = accumulate_dtype(x.dtype)
    floating = category(acc) >= 2
    lowest = -np.inf if floating else np.iinfo(acc).min
    taps = Taps(x, kernel, stride, padding, dilation, size, lowest, acc)
    check_nan = floating and bool(np.isnan(x).any())
    spatial = x.shape[-dims:]
    starts = [np.arange(o) * s - p for o, s, p in zip(size, stride, padding)]
    first = [np.where(st < 0, st + (-st + d - 1) // d * d, st) for st, d in zip(starts, dilation)]
    base, first_valid = _flat_index(starts, spatial), _flat_index(first, spatial)
    tap_offsets = _flat_index([np.arange(k) * d for k, d in zip(kernel, dilation)], spatial).ravel()
    values = _target(out, taps, acc)
    where = _target(indices, taps, np.int64)
    block = taps.blocks()[0].stop * taps.pitch
    best = workspace("blocks", (block,), acc)
    index_type = np.int8 if taps.count < 2**7 else np.int16 if taps.count < 2**15 else np.int64
    which, term = np.empty(block, index_type), np.empty(block, index_type)
    mask, nan = np.empty(block, bool), np.empty(block, bool)
    with quiet():
        for rows in taps.blocks():
            length = taps.run_length(rows)
            b, w, m = best[:length], which[:length], mask[:length]
            np.copyto(b, taps.run(0, rows))
            w.fill(0)
            for t in range(1, taps.count):  # ATen's rule, branch-free: which = max(which, taken * t)
                value = taps.run(t, rows)
                np.greater(value, b, out=m)
                if check_nan:
                    m |= np.isnan(value, out=nan[:length])
                np.maximum(b, value, out=b)  # nan propagates, like the rule
                np.multiply(m.view(index_type) if index_type == np.int8 else m, t, out=term[:length])
                np.maximum(w, term[:length], out=w)
            values[rows] = taps.grid(b)
            chosen = base + np.take(tap_offsets, taps.grid(w))
            np.equal(b, lowest, out=m)  # no tap beat the lowest value: the first in-bounds tap
            if m.any():
                none = taps.grid(m)
                chosen += none * (first_valid - chosen)
            where[rows] = chosen
    _finish(out, values)
    _finish(indices, where)


def _flat_index(coordinates, spatial) -> np.ndarray:
    """Flat offsets ``sum_d coordinate_d * stride_d`` as an outer sum over the dims."""
    total = np.zeros((1,) * len(spatial), np.int64)
    for d, values in enumerate(coordinates):
        shape = [1] * len(spatial)
        shape[d] = -1
        total = total + values.reshape(shape) * math.prod(spatial[d + 1:])
    return total


def _target(out, taps, dtype):
    """``out`` as a (rows, *out_size) view when it has ``dtype``, else a scratch buffer."""
    view = rows_view(out, (taps.rows,) + taps.out_size) if out.dtype == dtype else None
    return view if view is not None else np.empty((taps.rows,) + taps.out_size, dtype)


def _finish(out, buffer) -> None:
    if not np.may_share_memory(out, buffer):
        write(out, buffer.reshape(out.shape))


def avg_pool(op, dims, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out):
    """Window sums divided by ``divisor_override`` or the window size (clipped to the
    padded input, or to the input itself without ``count_include_pad``); integer averages
    truncate toward zero, as in C++."""
    x, out = batched(op, self, dims, out)
    check(x.dtype != np.bool_, op, "average pooling is not implemented for bool")
    check(divisor_override is None or divisor_override != 0, op, "divisor_override must be non-zero")
    kernel, stride, padding, _, size = pool_geometry(op, x, dims, kernel_size, stride, padding, (1,), ceil_mode)
    check(out.shape[-dims:] == size, op, f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}")
    if out.size == 0:
        return
    integral = category(x.dtype) < 2
    acc = np.dtype(np.int64) if integral else accumulate_dtype(x.dtype)
    taps = Taps(x, kernel, stride, padding, (1,) * dims, size, 0, acc)
    divisor = np.asarray(divisor_override or pool_divisors(tuple(x.shape[-dims:]), kernel, stride, padding, size,
                                                          count_include_pad)).astype(acc)
    result = _target(out, taps, acc)
    total = workspace("blocks", (taps.blocks()[0].stop * taps.pitch,), acc)
    with quiet():
        for rows in taps.blocks():
            block = total[:taps.run_length(rows)]
            np.copyto(block, taps.run(0, rows))
            for t in range(1, taps.count):
                block += taps.run(t, rows)
            sums = taps.grid(block)
            if integral:  # C++ integer division truncates toward zero
                result[rows] = np.abs(sums) // divisor * np.sign(sums)
            else:
                np.divide(sums, divisor, out=result[rows])
    _finish(out, result)


@functools.lru_cache(maxsize=256)
def pool_divisors(size, kernel, stride, padding, out_size, count_include_pad) -> np.ndarray:
    """Per-output window size: the window clipped to the padded input, or to the input
    (read-only; the arguments are tuples)."""
    counts = np.ones((1,) * len(size), np.int64)
    for d, (n, k, s, p, o) in enumerate(zip(size, kernel, stride, padding, out_size)):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        count = end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0)
        shape = [1] * len(size)
        shape[d] = -1
        counts = counts * count.reshape(shape)
    counts.flags.writeable = False
    return counts


def adaptive_avg_pool(op, dims, self, output_size, out):
    """Output cell i averages input cells floor(i*N/O) .. ceil((i+1)*N/O) along each dim."""
    x, out = batched(op, self, dims, out)
    check(category(x.dtype) >= 2, op, f"adaptive average pooling is not implemented for {x.dtype}")
    size = pair(output_size, dims, "output_size", op)
    check(min(size) > 0 and out.shape[-dims:] == size, op,
          f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}")
    spatial = x.shape[-dims:]
    acc = accumulate_dtype(x.dtype)
    with quiet():
        if all(n % o == 0 for n, o in zip(spatial, size)):  # equal, disjoint windows: reshape and mean
            blocks = x.reshape(x.shape[:2] + sum(((o, n // o) for n, o in zip(spatial, size)), ()))
            write(out, np.mean(blocks, axis=tuple(range(3, 3 + 2 * dims, 2)), dtype=acc))
            return
        matrices = [averaging_matrix(n, o, acc) for n, o in zip(spatial, size)]
        write(out, separable_matmul(x.astype(acc, copy=False), matrices))


def separable_matmul(x: np.ndarray, matrices: list) -> np.ndarray:
    """``x`` with its trailing dims multiplied by one matrix each: dim -k by ``matrices[-k]``
    (an (out_size, size) matrix), e.g. ``A @ x @ B.T`` for two dims."""
    for d, matrix in enumerate(matrices):
        x = matmul_along(x, matrix, x.ndim - len(matrices) + d)
    return x


def matmul_along(x: np.ndarray, matrix: np.ndarray, axis: int) -> np.ndarray:
    """``x`` with dim ``axis`` (of size n) replaced by ``matrix`` (m, n) times it."""
    lead, n, rest = x.shape[:axis], x.shape[axis], x.shape[axis + 1:]
    if not rest:  # the last dim: one GEMM over all rows
        return (x.reshape(-1, n) @ matrix.T).reshape(lead + (matrix.shape[0],))
    return (matrix @ x.reshape(lead + (n, math.prod(rest)))).reshape(lead + (matrix.shape[0],) + rest)


def averaging_matrix(size: int, out_size: int, dtype) -> np.ndarray:
    """(out_size, size) matrix whose row i averages the inputs of adaptive window i."""
    i = np.arange(out_size)
    start, end = i * size // out_size, -((-(i + 1) * size) // out_size)
    j = np.arange(size)
    inside = (j >= start[:, None]) & (j < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype)


for _dims in (2, 3):
    register_dims(f"aten::max_pool{_dims}d_with_indices.out", max_pool_with_indices, _dims)
    register_dims(f"aten::avg_pool{_dims}d.out", avg_pool, _dims)
    register_dims(f"aten::_adaptive_avg_pool{_dims}d.out", adaptive_avg_pool, _dims)


def _as_2d(array: np.ndarray) -> np.ndarray:
    """(N, C, L) or (C, L) as a view with a unit height dim: 1-D pooling is 2-D pooling of height 1."""
    return array[..., None, :]


@register_kernel("aten::avg_pool1d.out")
def avg_pool1d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, out):
    kernel, stride = tuple(kernel_size), tuple(stride) or tuple(kernel_size)
    avg_pool("aten::avg_pool1d.out", 2, _as_2d(self), (1, *kernel), (1, *stride), (0, *padding),
             ceil_mode, count_include_pad, None, _as_2d(out))


@register_kernel("aten::adaptive_avg_pool1d.out")
def adaptive_avg_pool1d(self, output_size, out):
    adaptive_avg_pool("aten::adaptive_avg_pool1d.out", 2, _as_2d(self), (1, *output_size), _as_2d(out))
