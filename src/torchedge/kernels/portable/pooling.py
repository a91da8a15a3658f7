"""2-d and 3-d max pooling (with ATen's indices) and 1-d to 3-d average pooling.

Every window is clipped to the input before anything is read or allocated
(`pooling_geometry`), so a kernel costs what its input and output sizes justify whatever its
kernel size, stride, padding or dilation: ``AvgPool2d(1280, ceil_mode=True)`` over a 5x5 map
reads 25 values per channel. `pooling_reduction` reduces the windows, tap by tap or one dim
at a time in blocks.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.portable.pooling_geometry import (
    DIRECT_TAPS,
    as_2d,
    batched,
    check_input,
    check_window_fits,
    pool_divisors,
    pool_geometry,
    pool_windows,
)
from torchedge.kernels.portable.pooling_reduction import (
    MaxRule,
    max_blocks,
    max_direct,
    max_values_direct,
    max_values_strided,
    reduce_windows,
    sum_blocks,
    sum_direct,
)
from torchedge.kernels.registry import register_kernel

__all__ = ["max_pool_with_indices", "max_pool_values", "avg_pool"]


def _check_out_size(op: str, dims: int, out, size: tuple) -> None:
    if out.shape[-dims:] != size:
        fail(op, f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}")


def max_pool_with_indices(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices):
    """Max over each window; indices are flat offsets into the input's spatial dims, chosen
    by ATen's rule (`MaxRule`); padding is never taken."""
    _max_pool(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices)


def max_pool_values(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out):
    """`max_pool_with_indices` without the indices, for programs that never read them (the
    runtime's load-time fusion): one maximum per tap instead of four passes, over strided views
    of the input where its windows need no padding."""
    _max_pool(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, None)


def _max_pool(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices):
    if indices is None:
        x, out = batched(op, self, dims, out)
    else:
        x, out, indices = batched(op, self, dims, out, indices)
    check(category(x.dtype) >= 1, op, f"max pooling is not implemented for {x.dtype}")
    kernel, stride, padding, dilation, size = pool_geometry(
        op, x, dims, kernel_size, stride, padding, dilation, ceil_mode
    )
    _check_out_size(op, dims, out, size)
    if out.size == 0:
        return
    if indices is None and _strided_taps(x, kernel, stride, padding, dilation, size):
        max_values_strided(x, kernel, stride, size, out)
        return
    acc = accumulate_dtype(x.dtype)
    floating = category(acc) >= 2
    rule = MaxRule(-np.inf if floating else np.iinfo(acc).min, floating and bool(np.isnan(x).any()))
    windows = pool_windows(x.shape[2:], kernel, stride, padding, dilation, size)
    with quiet():
        if windows.direct is not None and indices is None:
            max_values_direct(x, windows.direct, rule.lowest, acc, out)
            return
        if windows.direct is not None:
            max_direct(x, windows.direct, rule, windows.first, acc, out, indices)
            return
        values, index = reduce_windows(
            x.reshape((-1,) + x.shape[2:]).astype(acc, copy=False),
            windows.axes,
            functools.partial(max_blocks, rule=rule),
        )
        np.copyto(index, np.broadcast_to(windows.first, index.shape), where=values == rule.lowest)
    write(out, values.reshape(out.shape))
    if indices is not None:
        write(indices, index.reshape(indices.shape))


def _strided_taps(x, kernel, stride, padding, dilation, size) -> bool:
    """Whether every window lies inside the input with its taps adjacent (no padding or
    dilation), and there are few taps: each tap of every window is then one strided view."""
    return (
        not any(padding)
        and all(d == 1 for d in dilation)
        and all((n - 1) * s + k <= i for n, s, k, i in zip(size, stride, kernel, x.shape[2:]))
        and math.prod(kernel) <= DIRECT_TAPS
    )


def avg_pool(op, dims, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out):
    """Window sums divided by ``divisor_override`` or the window size (clipped to the
    padded input, or to the input itself without ``count_include_pad``); integer averages
    truncate toward zero, as in C++."""
    x, out = batched(op, self, dims, out)
    check(x.dtype != np.bool_, op, "average pooling is not implemented for bool")
    check(divisor_override is None or divisor_override != 0, op, "divisor_override must be non-zero")
    kernel, stride, padding, _, size = pool_geometry(op, x, dims, kernel_size, stride, padding, (1,), ceil_mode)
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

    windows = pool_windows(x.shape[2:], kernel, stride, padding, (1,) * dims, size)
    with quiet():
        if windows.direct is not None:
            sum_direct(x, windows.direct, acc, divide, out)
            return
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
def avg_pool1d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, out):
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
    )
