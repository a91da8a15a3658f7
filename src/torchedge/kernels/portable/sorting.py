"""topk: the k largest (or smallest) entries along a dim, with their indices."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import category
from torchedge.kernels.portable.common import check, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["topk"]


def _order(x: np.ndarray, largest: bool) -> np.ndarray:
    """Stable sort order along the last axis; nan counts as larger than every number."""
    floating = category(x.dtype) >= 2
    if not largest:
        return np.argsort(x, axis=-1, kind="stable")  # NumPy sorts nan last, as wanted
    if not floating:
        return np.argsort(~x, axis=-1, kind="stable")  # ~x reverses the order without overflow
    nan = np.isnan(x)
    if nan.any():
        return np.lexsort((-x, ~nan), axis=-1)  # nan first, then descending
    return np.argsort(-x, axis=-1, kind="stable")


@register_kernel("aten::topk.values")
def topk(self, k, dim, largest, sorted, values, indices):
    op = "aten::topk.values"
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis] if self.ndim else 1
    check(0 <= k <= size, op, f"k ({k}) is out of range for dimension {dim} of size {size}")
    x = np.moveaxis(self.reshape(1) if self.ndim == 0 else self, axis, -1)
    order = _order(x, largest)[..., :k]  # always sorted: a valid answer for sorted=False too
    values_view = np.moveaxis(values.reshape(1) if values.ndim == 0 else values, axis, -1)
    indices_view = np.moveaxis(indices.reshape(1) if indices.ndim == 0 else indices, axis, -1)
    write(values_view, np.take_along_axis(x, order, axis=-1))
    write(indices_view, order)
