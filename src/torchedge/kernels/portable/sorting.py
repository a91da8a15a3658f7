"""Orderings along a dim: sort, argsort, topk (nan counts as larger than every number), equal
values in eager's order (see `introsort`)."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype
from torchedge.kernels.portable.common import check, fail, wrap_dim, write
from torchedge.kernels.portable.introsort import introselect, introsort, partial_sort
from torchedge.kernels.portable.shape_rules import replaced, same_as
from torchedge.kernels.registry import register_kernel

__all__ = ["sort", "sort_stable", "argsort", "topk"]


def _keys(x: np.ndarray, descending: bool) -> np.ndarray:
    """Integer keys whose ascending order is the wanted one: equal values (0 and -0, every
    nan) share a key, nan counts as larger than every number."""
    x = x.astype(accumulate_dtype(x.dtype), copy=False)  # NumPy misplaces nan in bfloat16
    rank = np.unique(x, return_inverse=True)[1].reshape(x.shape).astype(np.int64)
    return -rank if descending else rank


def _order(x: np.ndarray, descending: bool, stable: bool) -> np.ndarray:
    """Positions along the last axis in eager's order: a stable sort, or the C++ introsort
    eager's unstable sort runs (its order among equal values)."""
    keys = _keys(x, descending)
    if stable:
        return np.argsort(keys, axis=-1, kind="stable")
    rows = keys.reshape(-1, keys.shape[-1]) if keys.size else keys.reshape(0, keys.shape[-1])
    positions = np.broadcast_to(np.arange(keys.shape[-1]), rows.shape).copy()
    introsort(rows, positions)
    return positions.reshape(keys.shape)


def _top(x: np.ndarray, k: int, largest: bool, sorted: bool) -> np.ndarray:
    """Positions of eager's topk: a partial sort when k is small against the size, else the
    k-th entry selected and (if ``sorted``) the entries before it sorted."""
    keys = _keys(x, largest)
    n = keys.shape[-1]
    rows = keys.reshape(-1, n).copy()
    positions = np.broadcast_to(np.arange(n), rows.shape).copy()
    if k == 0 or not rows.size:
        return positions[:, :k].reshape(keys.shape[:-1] + (k,))
    if k * 64 <= n:
        partial_sort(rows, positions, k)
    else:
        introselect(rows, positions, k - 1)
        if sorted:
            head_keys, head = rows[:, : k - 1].copy(), positions[:, : k - 1].copy()
            introsort(head_keys, head)
            positions[:, : k - 1] = head
    return positions[:, :k].reshape(keys.shape[:-1] + (k,))


def _last(a: np.ndarray, axis: int) -> np.ndarray:
    """A view of ``a`` with ``axis`` moved last (a 0-dim tensor counts as one element)."""
    return np.moveaxis(a.reshape(1) if a.ndim == 0 else a, axis, -1)


def _sorted(op: str, self, dim, descending, stable, values, indices) -> None:
    axis = wrap_dim(dim, self.ndim, op)
    x = _last(self, axis)
    order = _order(x, descending, stable)
    if values is not None:
        write(_last(values, axis), np.take_along_axis(x, order, axis=-1))
    write(_last(indices, axis), order)


@register_kernel("aten::sort.values", shape=same_as(outs=2))
def sort(self, dim, descending, values, indices):
    """Unstable, in eager's order among equal values."""
    _sorted("aten::sort.values", self, dim, descending, False, values, indices)


@register_kernel("aten::sort.values_stable", shape=same_as(outs=2))
def sort_stable(self, stable, dim, descending, values, indices):
    _sorted("aten::sort.values_stable", self, dim, descending, bool(stable), values, indices)


@register_kernel("aten::argsort.stable_out", shape=same_as())
def argsort(self, stable, dim, descending, out):
    _sorted("aten::argsort.stable_out", self, dim, descending, bool(stable), None, out)


def _topk_axis(op: str, self, k, dim) -> int:
    """The axis topk cuts to ``k`` entries, k checked in range."""
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis] if self.ndim else 1
    if not 0 <= k <= size:
        fail(op, f"k ({k}) is out of range for dimension {dim} of size {size}")
    return axis


def _topk_shape(op: str, self, k, dim, largest, sorted, values, indices) -> list[tuple]:
    """self with dim ``dim`` cut to its k largest (or smallest) entries."""
    axis = _topk_axis(op, self, k, dim)
    shape = replaced(self.shape, axis, k) if self.ndim else ()
    return [shape, shape]


@register_kernel("aten::topk.values", shape=_topk_shape)
def topk(self, k, dim, largest, sorted, values, indices):
    op = "aten::topk.values"
    axis = _topk_axis(op, self, k, dim)
    check(self.dtype != np.bool_, op, "does not support bool tensors (as on PyTorch's CPU)")
    x = _last(self, axis)
    order = _top(x, k, largest, sorted)
    write(_last(values, axis), np.take_along_axis(x, order, axis=-1))
    write(_last(indices, axis), order)
