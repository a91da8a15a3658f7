"""topk: the k largest (or smallest) entries along a dim, with their indices."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import category
from torchedge.kernels.portable.common import check, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["topk"]


def _sort_key(x: np.ndarray, largest: bool) -> np.ndarray:
    """A key whose ascending order is the wanted order (for largest: no nan in x)."""
    if not largest:
        return x  # NumPy sorts nan last, as wanted
    return -x if category(x.dtype) >= 2 else ~x  # ~x reverses integers without overflow


def _order(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """Positions of the first k entries along the last axis, ties by position; nan
    counts as larger than every number."""
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


@register_kernel("aten::topk.values")
def topk(self, k, dim, largest, sorted, values, indices):
    op = "aten::topk.values"
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis] if self.ndim else 1
    check(0 <= k <= size, op, f"k ({k}) is out of range for dimension {dim} of size {size}")
    x = np.moveaxis(self.reshape(1) if self.ndim == 0 else self, axis, -1)
    order = _order(x, k, largest)  # always sorted: a valid answer for sorted=False too
    values_view = np.moveaxis(values.reshape(1) if values.ndim == 0 else values, axis, -1)
    indices_view = np.moveaxis(indices.reshape(1) if indices.ndim == 0 else indices, axis, -1)
    write(values_view, np.take_along_axis(x, order, axis=-1))
    write(indices_view, order)
