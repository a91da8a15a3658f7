"""Adaptive average pooling, 1-d to 3-d: output cell i averages input cells
floor(i*N/O) .. ceil((i+1)*N/O) along each dim.

The windows are averaged one dim at a time (the dims that shrink first, so that no
intermediate outgrows the input and output), by one ``np.add.reduceat`` over their bounds
(they overlap by at most one element; `adaptive_mean_along`); the kernels take another
``mean_along`` of the same contract. `map_dims`, `shrinking_first` and `adaptive_bounds`
also serve the backward kernels.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, pair, quiet, write
from torchedge.kernels.portable.pooling_geometry import as_2d, batched, check_input, check_nonempty
from torchedge.kernels.registry import register_kernel

__all__ = ["adaptive_avg_pool", "adaptive_mean_along", "adaptive_bounds", "map_dims", "shrinking_first"]


def adaptive_avg_pool(op, dims, self, output_size, out, *, mean_along: Callable | None = None):
    """Output cell i averages input cells floor(i*N/O) .. ceil((i+1)*N/O) along each dim, by
    ``mean_along(view, out_size)`` (default `adaptive_mean_along`) one dim at a time."""
    along = adaptive_mean_along if mean_along is None else mean_along
    x, out = batched(op, self, dims, out)
    check(category(x.dtype) >= 2, op, f"adaptive average pooling is not implemented for {x.dtype}")
    check_nonempty(op, x, dims)
    size = pair(output_size, dims, "output_size", op)
    check(
        min(size) > 0 and out.shape[-dims:] == size,
        op,
        f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}",
    )
    if out.size == 0:
        return
    rows = x.reshape((-1,) + x.shape[2:]).astype(accumulate_dtype(x.dtype), copy=False)
    with quiet():
        means = map_dims(rows, lambda d, y: along(y, size[d]), shrinking_first(x.shape[2:], size))
    write(out, means.reshape(out.shape))


def map_dims(x: np.ndarray, along, order) -> np.ndarray:
    """(rows, *spatial) ``x`` with each spatial dim d, in ``order``, replaced by dim 1 of
    ``along(d, (pre, n, post) view of x)``."""
    for d in order:
        shape = x.shape
        result = along(d, x.reshape(math.prod(shape[: d + 1]), shape[d + 1], math.prod(shape[d + 2 :])))
        x = result.reshape(shape[: d + 1] + (result.shape[1],) + shape[d + 2 :])
    return x


def shrinking_first(size, out_size) -> list:
    """The dims that shrink from ``size`` to ``out_size``, the last first, then those that grow, the
    first first: mapped in this order, no intermediate is larger than both the input and the output."""
    dims = range(len(size))
    return [d for d in reversed(dims) if out_size[d] <= size[d]] + [d for d in dims if out_size[d] > size[d]]


def adaptive_bounds(size: int, out_size: int) -> np.ndarray:
    """(2, out_size): the start and stop of each adaptive window."""
    i = np.arange(out_size)
    return np.stack([i * size // out_size, -((-(i + 1) * size) // out_size)])


def adaptive_mean_along(x: np.ndarray, out_size: int) -> np.ndarray:
    """(pre, n, post) -> (pre, out_size, post) means of the adaptive windows: `np.add.reduceat`
    over the interleaved bounds (what lies between a window's stop and the next start, one
    element where they overlap, is dropped). Those stops fall inside the input unless there
    are more windows than inputs; then a padding zero holds the last one."""
    n = x.shape[1]
    start, stop = adaptive_bounds(n, out_size)
    if out_size > n:
        x = np.concatenate([x, np.zeros_like(x[:, :1])], axis=1)
    sums = np.add.reduceat(x, np.stack([start, stop], 1).reshape(-1)[:-1], axis=1)[:, ::2]
    return np.divide(sums, (stop - start).astype(x.dtype)[:, None], out=sums)


# Shape functions, called as ``shape(dims, op, *schema arguments)`` (the registry binds op).
def _adaptive_avg_pool_shape(dims: int, op: str, self, output_size, out) -> list[tuple]:
    check_input(op, dims, self)
    check_nonempty(op, self, dims)
    size = pair(output_size, dims, "output_size", op)
    check(min(size) > 0, op, f"output_size {list(output_size)} must be positive")
    return [self.shape[:-dims] + size]


for _op, _dims in [("aten::_adaptive_avg_pool2d.out", 2), ("aten::_adaptive_avg_pool3d.out", 3)]:
    register_kernel(_op, shape=functools.partial(_adaptive_avg_pool_shape, _dims))(
        functools.partial(adaptive_avg_pool, _op, _dims)
    )


@register_kernel("aten::adaptive_avg_pool1d.out", shape=functools.partial(_adaptive_avg_pool_shape, 1))
def adaptive_avg_pool1d(self, output_size, out, *, mean_along: Callable | None = None):
    op = "aten::adaptive_avg_pool1d.out"
    adaptive_avg_pool(op, 2, as_2d(self), (1, *output_size), as_2d(out), mean_along=mean_along)
