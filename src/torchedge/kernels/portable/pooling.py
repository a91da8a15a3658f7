"""2-d and 3-d max pooling (with ATen's indices) and 1-d to 3-d average pooling.

Every window is clipped to the input before anything is read or allocated
(`pooling_geometry`), so a kernel costs what its input and output sizes justify whatever its
kernel size, stride, padding or dilation: ``AvgPool2d(1280, ceil_mode=True)`` over a 5x5 map
reads 25 values per channel. `pooling_reduction` reduces the windows one dim at a time, in
blocks. The kernels take a ``strategy`` that may reduce the windows instead (the optimized
library's overrides pass theirs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.portable.pooling_geometry import (
    as_2d,
    batched,
    check_input,
    check_window_fits,
    pool_divisors,
    pool_geometry,
    pool_windows,
)
from torchedge.kernels.portable.pooling_reduction import MaxRule, max_blocks, reduce_windows, sum_blocks
from torchedge.kernels.registry import register_kernel

__all__ = ["max_pool_with_indices", "avg_pool", "max_rule"]


def _check_out_size(op: str, dims: int, out, size: tuple) -> None:
    if out.shape[-dims:] != size:
        fail(op, f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}")


def max_rule(x: np.ndarray) -> tuple[MaxRule, np.dtype]:
    """ATen's `MaxRule` for ``x`` and the dtype its maxima are taken in."""
    acc = accumulate_dtype(x.dtype)
    floating = category(acc) >= 2
    return MaxRule(-np.inf if floating else np.iinfo(acc).min, floating and bool(np.isnan(x).any())), acc


def max_pool_with_indices(
    op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices, *, strategy: Callable | None = None
):
    """Max over each window; indices are flat offsets into the input's spatial dims, chosen
    by ATen's rule (`MaxRule`); padding is never taken. ``indices`` None: the values only.
    ``strategy(x, geometry, out, indices)`` (geometry: kernel, stride, padding, dilation and
    output size) runs first on the batched operands and returns whether it wrote them."""
    if indices is None:
        x, out = batched(op, self, dims, out)
    else:
        x, out, indices = batched(op, self, dims, out, indices)
    check(category(x.dtype) >= 1, op, f"max pooling is not implemented for {x.dtype}")
    geometry = pool_geometry(op, x, dims, kernel_size, stride, padding, dilation, ceil_mode)
    _check_out_size(op, dims, out, geometry[-1])
    if out.size == 0 or (strategy is not None and strategy(x, geometry, out, indices)):
        return
    rule, acc = max_rule(x)
    windows = pool_windows(x.shape[2:], *geometry)
    with quiet():
        values, index = reduce_windows(
            x.reshape((-1,) + x.shape[2:]).astype(acc, copy=False),
            windows.axes,
            functools.partial(max_blocks, rule=rule),
        )
        assert index is not None  # (max_blocks gives the positions)
        np.copyto(index, np.broadcast_to(windows.first, index.shape), where=values == rule.lowest)
    write(out, values.reshape(out.shape))
    if indices is not None:
        write(indices, index.reshape(indices.shape))


def avg_pool(
    op,
    dims,
    self,
    kernel_size,
    stride,
    padding,
    ceil_mode,
    count_include_pad,
    divisor_override,
    out,
    *,
    strategy: Callable | None = None,
):
    """Window sums divided by ``divisor_override`` or the window size (clipped to the
    padded input, or to the input itself without ``count_include_pad``); integer averages
    truncate toward zero, as in C++. ``strategy(x, geometry, acc, divide, out)`` runs first
    and returns whether it wrote ``out`` (``divide(sums, result)`` turns sums into averages)."""
    x, out = batched(op, self, dims, out)
    check(x.dtype != np.bool_, op, "average pooling is not implemented for bool")
    check(divisor_override is None or divisor_override != 0, op, "divisor_override must be non-zero")
    geometry = pool_geometry(op, x, dims, kernel_size, stride, padding, (1,), ceil_mode)
    kernel, stride, padding, _, size = geometry
    check_window_fits(op, x, dims, kernel)
    _check_out_size(op, dims, out, size)
    if out.size == 0:
        return
    integral = category(x.dtype) < 2
    acc = np.dtype(np.int64) if integral else accumulate_dtype(x.dtype)
    divisor = np.asarray(
        divisor_override or pool_divisors(tuple(x.shape[2:]), kernel, stride, padding, size, count_include_pad)
    ).astype(acc)

    def divide(sums, result):
        if integral:  # C++ integer division truncates toward zero
            result[...] = np.abs(sums) // divisor * np.sign(sums)
        else:
            np.divide(sums, divisor, out=result)

    with quiet():
        if strategy is not None and strategy(x, geometry, acc, divide, out):
            return
        windows = pool_windows(x.shape[2:], *geometry)
        sums, _ = reduce_windows(x.reshape((-1,) + x.shape[2:]).astype(acc, copy=False), windows.axes, sum_blocks)
        divide(sums, sums)
    write(out, sums.reshape(out.shape))


# Shape functions, called as ``shape(dims, op, *schema arguments)`` (the registry binds op).
def _max_pool_shape(
    dims: int, op: str, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices
) -> list[tuple]:
    check_input(op, dims, self)
    *_, size = pool_geometry(op, self, dims, kernel_size, stride, padding, dilation, ceil_mode)
    return [self.shape[:-dims] + size] * 2


def _avg_pool_shape(
    dims: int, op: str, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out
) -> list[tuple]:
    check_input(op, dims, self)
    kernel, *_, size = pool_geometry(op, self, dims, kernel_size, stride, padding, (1,), ceil_mode)
    check_window_fits(op, self, dims, kernel)
    return [self.shape[:-dims] + size]


# op name, kernel ``impl(op, dims, *schema arguments)``, shape function, spatial dims
_POOLS: list[tuple[str, Callable, Callable, int]] = [
    ("aten::max_pool2d_with_indices.out", max_pool_with_indices, _max_pool_shape, 2),
    ("aten::max_pool3d_with_indices.out", max_pool_with_indices, _max_pool_shape, 3),
    ("aten::avg_pool2d.out", avg_pool, _avg_pool_shape, 2),
    ("aten::avg_pool3d.out", avg_pool, _avg_pool_shape, 3),
]
for _op, _impl, _shape, _dims in _POOLS:
    register_kernel(_op, shape=functools.partial(_shape, _dims))(functools.partial(_impl, _op, _dims))


def _avg_pool1d_shape(op: str, self, kernel_size, stride, padding, ceil_mode, count_include_pad, out) -> list[tuple]:
    return _avg_pool_shape(1, op, self, kernel_size, stride, padding, ceil_mode, count_include_pad, None, out)


@register_kernel("aten::avg_pool1d.out", shape=_avg_pool1d_shape)
def avg_pool1d(
    self, kernel_size, stride, padding, ceil_mode, count_include_pad, out, *, strategy: Callable | None = None
):
    """2-d average pooling of height 1."""
    kernel, stride = tuple(kernel_size), tuple(stride) or tuple(kernel_size)
    avg_pool(
        "aten::avg_pool1d.out",
        2,
        as_2d(self),
        (1, *kernel),
        (1, *stride),
        (0, *padding),
        ceil_mode,
        count_include_pad,
        None,
        as_2d(out),
        strategy=strategy,
    )
