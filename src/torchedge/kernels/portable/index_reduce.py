"""``index_reduce``: ``self`` with the slices at ``index`` along ``dim`` reduced (prod, mean,
amax, amin) with the matching slices of ``source``.

With ``include_self`` false the indexed slices start from the reduction's identity instead
of ``self``; slices no index names keep ``self``. Integer means divide with floor rounding,
and NaN propagates through amax and amin, as in ATen.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, INT64, is_floating
from torchedge.kernels.portable.common import check, fail, quiet, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["index_reduce"]

_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _identity(reduce: str, dtype: np.dtype):
    if reduce == "prod":
        return 1
    if reduce == "mean":
        return 0
    if is_floating(dtype):
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _check(op: str, self, dim, index, source, reduce) -> int:
    check(reduce in _REDUCTIONS, op, f"reduce argument must be one of {list(_REDUCTIONS)}, got '{reduce}'")
    check(self.dtype != BOOL, op, "not implemented for bool tensors")
    check(source.dtype == self.dtype, op, f"source dtype {source.dtype} must be self's dtype {self.dtype}")
    check(index.dtype in (INT64, np.dtype(np.int32)), op, f"index must be an int64 or int32 tensor, got {index.dtype}")
    check(index.ndim <= 1, op, f"index must be a vector, got a {index.ndim}-D tensor")
    axis = wrap_dim(dim, self.ndim, op)
    self_shape = self.shape if self.ndim else (1,)
    source_shape = source.shape if source.ndim else (1,)
    check(
        len(source_shape) == len(self_shape)
        and source_shape[:axis] + source_shape[axis + 1 :] == self_shape[:axis] + self_shape[axis + 1 :],
        op,
        "source tensor shape must match self tensor shape, excluding the specified dimension. "
        f"Got self.shape = {list(self.shape)} source.shape = {list(source.shape)}",
    )
    check(
        source_shape[axis] == index.size,
        op,
        f"index ({index.size} entries) and source (size {source_shape[axis]} at dim {axis}) must agree",
    )
    if index.size and (int(index.min()) < 0 or int(index.max()) >= self_shape[axis]):
        fail(op, f"index out of range in self: indices must lie in [0, {self_shape[axis]})")
    return axis


@register_kernel("aten::index_reduce.out", shape=lambda op, self, *rest: [self.shape])
def index_reduce(self, dim, index, source, reduce, include_self, out):
    op = "aten::index_reduce.out"
    axis = _check(op, self, dim, index, source, reduce)
    result = np.array(self, dtype=self.dtype).reshape(self.shape if self.ndim else (1,))
    view = np.moveaxis(result, axis, 0)
    src = np.moveaxis(source.reshape(source.shape if source.ndim else (1,)), axis, 0)
    idx = index.reshape(-1).astype(INT64)
    if not include_self:
        view[idx] = _identity(reduce, self.dtype)
    with quiet():
        if reduce == "prod":
            np.multiply.at(view, idx, src)
        elif reduce == "amax":
            np.maximum.at(view, idx, src)
        elif reduce == "amin":
            np.minimum.at(view, idx, src)
        else:
            np.add.at(view, idx, src)
            counts = np.bincount(idx, minlength=view.shape[0]) + int(bool(include_self))
            touched = np.bincount(idx, minlength=view.shape[0]) > 0
            shape = (-1,) + (1,) * (view.ndim - 1)
            divisor = np.maximum(counts, 1).reshape(shape).astype(self.dtype)
            means = view / divisor if is_floating(self.dtype) else view // divisor
            view[touched] = means[touched]
    write(out, result.reshape(self.shape))
