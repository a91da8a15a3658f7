"""Orderings along a dim: sort, argsort, topk (nan counts as larger than every number)."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, wrap_dim, write
from torchedge.kernels.portable.shape_rules import replaced, same_as
from torchedge.kernels.registry import register_kernel

__all__ = ["sort", "sort_stable", "argsort", "topk"]


def _sort_key(x: np.ndarray, largest: bool) -> np.ndarray:
    """A key whose ascending order is the wanted order (for largest: no nan in x)."""
    if not largest:
        return x  # NumPy sorts nan last, as wanted
    return -x if category(x.dtype) >= 2 else ~x  # ~x reverses integers (and bool) without overflow


def _order(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """Positions of the first k entries along the last axis, ties by position; nan
    counts as larger than every number."""
    x = x.astype(accumulate_dtype(x.dtype), copy=False)  # NumPy misplaces nan in bfloat16
    if largest and category(x.dtype) >= 2:
        nan = np.isnan(x)
        if nan.any():
            return np.lexsort((-x, ~nan), axis=-1)[..., :k]  # nan first, then descending
    key = _sort_key(x, largest)
    if k == 0 or 4 * k >= x.shape[-1]:
        return np.argsort(key, axis=-1, kind="stable")[..., :k]
    chosen = np.argpartition(key, k - 1, axis=-1)[..., :k]  # the k smallest keys, unordered
    rank = np.lexsort((chosen, np.take_along_axis(key, chosen, axis=-1)), axis=-1)
    return np.take_along_axis(chosen, rank, axis=-1)


def _last(a: np.ndarray, axis: int) -> np.ndarray:
    """A view of ``a`` with ``axis`` moved last (a 0-dim tensor counts as one element)."""
    return np.moveaxis(a.reshape(1) if a.ndim == 0 else a, axis, -1)


def _sorted(op: str, self, dim, descending, k, values, indices) -> None:
    axis = wrap_dim(dim, self.ndim, op)
    x = _last(self, axis)
    order = _order(x, x.shape[-1] if k is None else k, descending)
    if values is not None:
        write(_last(values, axis), np.take_along_axis(x, order, axis=-1))
    write(_last(indices, axis), order)


@register_kernel("aten::sort.values", shape=same_as(outs=2))
def sort(self, dim, descending, values, indices):
    """Always stable: a valid answer for an unstable sort too."""
    _sorted("aten::sort.values", self, dim, descending, None, values, indices)


@register_kernel("aten::sort.values_stable", shape=same_as(outs=2))
def sort_stable(self, stable, dim, descending, values, indices):
    _sorted("aten::sort.values_stable", self, dim, descending, None, values, indices)


@register_kernel("aten::argsort.stable_out", shape=same_as())
def argsort(self, stable, dim, descending, out):
    _sorted("aten::argsort.stable_out", self, dim, descending, None, None, out)


def _topk_shape(op: str, self, k, dim, largest, sorted, values, indices) -> list[tuple]:
    """self with dim ``dim`` cut to its k largest (or smallest) entries."""
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis] if self.ndim else 1
    check(0 <= k <= size, op, f"k ({k}) is out of range for dimension {dim} of size {size}")
    shape = replaced(self.shape, axis, k) if self.ndim else ()
    return [shape, shape]


@register_kernel("aten::topk.values", shape=_topk_shape)
def topk(self, k, dim, largest, sorted, values, indices):
    op = "aten::topk.values"
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis] if self.ndim else 1
    check(0 <= k <= size, op, f"k ({k}) is out of range for dimension {dim} of size {size}")
    check(self.dtype != np.bool_, op, "does not support bool tensors (as on PyTorch's CPU)")
    _sorted(op, self, dim, largest, k, values, indices)  # always sorted: a valid answer for sorted=False too
