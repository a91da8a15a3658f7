"""Pooling over the trailing 1-3 dims: max (values and indices), average, adaptive average.

The window arithmetic (ceil_mode included) is the kernels' own `pool_geometry`.
"""

from __future__ import annotations

from torchedge.kernels.portable.common import pair
from torchedge.kernels.portable.pooling import check_nonempty, check_window_fits, pool_geometry
from torchedge.kernels.shapes.common import check
from torchedge.kernels.shapes.registry import register_named

__all__ = ["max_pool", "avg_pool", "avg_pool1d", "adaptive_avg_pool"]


def _check_input(op: str, dims: int, x) -> None:
    check(x.ndim in (dims + 1, dims + 2), op, f"expected a (N, C, *spatial) or (C, *spatial) input of "
                                              f"{dims} spatial dims, got shape {list(x.shape)}")


def max_pool(op: str, dims: int, self, kernel_size, stride, padding, dilation, ceil_mode, out,
             indices) -> list[tuple]:
    _check_input(op, dims, self)
    *_, size = pool_geometry(op, self, dims, kernel_size, stride, padding, dilation, ceil_mode)
    return [self.shape[:-dims] + size] * 2


def avg_pool(op: str, dims: int, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
             out) -> list[tuple]:
    _check_input(op, dims, self)
    kernel, *_, size = pool_geometry(op, self, dims, kernel_size, stride, padding, (1,), ceil_mode)
    check_window_fits(op, self, dims, kernel)
    return [self.shape[:-dims] + size]


def adaptive_avg_pool(op: str, dims: int, self, output_size, out) -> list[tuple]:
    _check_input(op, dims, self)
    check_nonempty(op, self, dims)
    size = pair(output_size, dims, "output_size", op)
    check(min(size) > 0, op, f"output_size {list(output_size)} must be positive")
    return [self.shape[:-dims] + size]


for _dims in (2, 3):
    register_named(f"aten::max_pool{_dims}d_with_indices.out", bind=(_dims,))(max_pool)
    register_named(f"aten::avg_pool{_dims}d.out", bind=(_dims,))(avg_pool)
register_named("aten::_adaptive_avg_pool2d.out", bind=(2,))(adaptive_avg_pool)
register_named("aten::_adaptive_avg_pool3d.out", bind=(3,))(adaptive_avg_pool)
register_named("aten::adaptive_avg_pool1d.out", bind=(1,))(adaptive_avg_pool)


@register_named("aten::avg_pool1d.out")
def avg_pool1d(op: str, self, kernel_size, stride, padding, ceil_mode, count_include_pad, out) -> list[tuple]:
    return avg_pool(op, 1, self, kernel_size, stride, padding, ceil_mode, count_include_pad, None, out)
