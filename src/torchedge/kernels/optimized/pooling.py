"""The optimized max and average pooling: a strategy per pool shape over the portable reference.

The portable kernels reduce the clipped windows one dim at a time in blocks, whatever their
shape. Here windows with few taps that reach the input (`pool_direct_taps`) and a padded
layout within `pool_direct_layout` times the input and output are reduced tap by tap over the
flat runs of `Taps` (`pooling_direct`); maxima without indices of unpadded, undilated windows
inside the input take one maximum per tap over strided views of the input. Other windows keep
the portable blocks. Maxima and indices are those of the reference; average pools sum the
taps in another order (float reassociation). The thresholds are in `tuning`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from torchedge.kernels.optimized.pooling_direct import (
    direct_windows,
    max_direct,
    max_values_direct,
    max_values_strided,
    sum_direct,
)
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable import pooling as reference
from torchedge.kernels.portable.common import quiet
from torchedge.kernels.portable.pooling_geometry import pool_windows
from torchedge.kernels.registry import register_kernel

__all__ = ["max_pool_with_indices", "max_pool_values", "avg_pool1d"]


def _direct(x, geometry):
    return direct_windows(
        tuple(x.shape[2:]), *geometry, int(tuned("pool_direct_taps")), float(tuned("pool_direct_layout"))
    )


def _strided_taps(x, geometry) -> bool:
    """Whether every window lies inside the input with its taps adjacent (no padding or
    dilation), and there are few taps: each tap of every window is then one strided view."""
    kernel, stride, padding, dilation, size = geometry
    return (
        not any(padding)
        and all(d == 1 for d in dilation)
        and all((n - 1) * s + k <= i for n, s, k, i in zip(size, stride, kernel, x.shape[2:]))
        and math.prod(kernel) <= tuned("pool_strided_taps")
    )


def _max_strategy(x, geometry, out, indices) -> bool:
    if indices is None and _strided_taps(x, geometry):
        kernel, stride, _, _, size = geometry
        max_values_strided(x, kernel, stride, size, out)
        return True
    direct = _direct(x, geometry)
    if direct is None:
        return False
    rule, acc = reference.max_rule(x)
    with quiet():
        if indices is None:
            max_values_direct(x, direct, rule.lowest, acc, out)
        else:
            max_direct(x, direct, rule, pool_windows(x.shape[2:], *geometry).first, acc, out, indices)
    return True


def _avg_strategy(x, geometry, acc, divide, out) -> bool:
    direct = _direct(x, geometry)
    if direct is not None:
        sum_direct(x, direct, acc, divide, out)
    return direct is not None


def max_pool_with_indices(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices):
    """`torchedge.kernels.portable.pooling.max_pool_with_indices` by the strategy that suits the pool."""
    reference.max_pool_with_indices(
        op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices, strategy=_max_strategy
    )


def max_pool_values(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out):
    """The values of `max_pool_with_indices`, without computing the indices."""
    max_pool_with_indices(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, None)


_IMPLS: list[tuple[str, Callable, int]] = [
    ("aten::max_pool2d_with_indices.out", max_pool_with_indices, 2),
    ("aten::max_pool3d_with_indices.out", max_pool_with_indices, 3),
    ("aten::avg_pool2d.out", functools.partial(reference.avg_pool, strategy=_avg_strategy), 2),
    ("aten::avg_pool3d.out", functools.partial(reference.avg_pool, strategy=_avg_strategy), 3),
]
for _op, _impl, _dims in _IMPLS:
    register_kernel(_op, library="optimized")(functools.partial(_impl, _op, _dims))


@register_kernel("aten::avg_pool1d.out", library="optimized")
def avg_pool1d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, out):
    """`torchedge.kernels.portable.pooling.avg_pool1d` by the strategy that suits the pool."""
    reference.avg_pool1d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, out, strategy=_avg_strategy)
