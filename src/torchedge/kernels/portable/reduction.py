"""Reductions: sum, mean, amax/amin, any, argmax/argmin, cumsum."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, INT64, accumulate_dtype, category, dtype_from_code
from torchedge.kernels.portable.common import check, finish, quiet, scratch, wrap_dim, wrap_dims, write
from torchedge.kernels.registry import register_kernel

__all__ = ["sum_dim", "mean_dim", "amax", "amin", "any_dim", "argmax", "argmin", "cumsum"]


def _sum_dtype(self: np.ndarray, dtype_code) -> np.dtype:
    # sum and cumsum: bool and integers accumulate in int64 unless a dtype is given
    return dtype_from_code(dtype_code, INT64 if category(self.dtype) < 2 else self.dtype)


def _reduce_into(reduce, self, axes, keepdim, buffer_dtype, out, **kwargs) -> None:
    buf = scratch(out, buffer_dtype)
    with quiet():
        reduce(self, axis=axes, keepdims=keepdim, out=buf, **kwargs)
    finish(out, buf)


@register_kernel("aten::sum.IntList_out")
def sum_dim(self, dim, keepdim, dtype, out):
    axes = wrap_dims(dim, self.ndim, "aten::sum.IntList_out")
    acc = accumulate_dtype(_sum_dtype(self, dtype))
    _reduce_into(np.sum, self, axes, keepdim, acc, out, dtype=acc)


def _mean(op, self, axes, keepdim, dtype_code, out):
    dtype = dtype_from_code(dtype_code, self.dtype)
    check(category(dtype) >= 2, op, f"could not infer the output dtype: the input is {self.dtype}; "
                                    "mean needs a floating point input or an explicit dtype")
    acc = accumulate_dtype(dtype)
    _reduce_into(np.mean, self, axes, keepdim, acc, out, dtype=acc)


@register_kernel("aten::mean.out")
def mean_dim(self, dim, keepdim, dtype, out):
    _mean("aten::mean.out", self, wrap_dims(dim, self.ndim, "aten::mean.out"), keepdim, dtype, out)


@register_kernel("aten::mean.dtype_out")
def mean(self, dtype, out):
    _mean("aten::mean.dtype_out", self, tuple(range(self.ndim)), False, dtype, out)


def _extreme_kernel(op: str, reduce):
    def kernel(self, dim, keepdim, out):
        axes = wrap_dims(dim, self.ndim, op)
        check(all(self.shape[a] > 0 for a in axes), op, f"cannot reduce over a zero-size dimension (input shape "
                                                        f"{list(self.shape)}, dim {list(dim)})")
        _reduce_into(reduce, self, axes, keepdim, self.dtype, out)  # nan propagates

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


amax = register_kernel("aten::amax.out")(_extreme_kernel("aten::amax.out", np.max))
amin = register_kernel("aten::amin.out")(_extreme_kernel("aten::amin.out", np.min))


@register_kernel("aten::any.dims_out")
def any_dims(self, dim, keepdim, out):
    # unlike sum's, an empty dim list reduces nothing (None reduces everything)
    axes = () if dim is not None and len(dim) == 0 else wrap_dims(dim, self.ndim, "aten::any.dims_out")
    _reduce_into(np.any, self, axes, keepdim, BOOL, out)


@register_kernel("aten::any.out")
def any_dim(self, dim, keepdim, out):
    any_dims(self, (dim,), keepdim, out)


@register_kernel("aten::any.all_out")
def any_all(self, out):
    any_dims(self, None, False, out)


def _arg_kernel(op: str, reduce):
    def kernel(self, dim, keepdim, out):
        check(self.size > 0, op, "cannot take the index of an extreme of an empty tensor")
        if dim is None:  # an index into the flattened tensor
            write(out, reduce(self))
            return
        axis = wrap_dim(dim, self.ndim, op)
        write(out, reduce(self, axis=axis, keepdims=keepdim) if self.ndim else 0)  # first nan wins

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


argmax = register_kernel("aten::argmax.out")(_arg_kernel("aten::argmax.out", np.argmax))
argmin = register_kernel("aten::argmin.out")(_arg_kernel("aten::argmin.out", np.argmin))


@register_kernel("aten::cumsum.out")
def cumsum(self, dim, dtype, out):
    axis = wrap_dim(dim, self.ndim, "aten::cumsum.out")
    if self.ndim == 0:
        write(out, self)
        return
    acc = accumulate_dtype(_sum_dtype(self, dtype))
    buf = scratch(out, acc)
    with quiet():
        np.cumsum(self, axis=axis, dtype=acc, out=buf)
    finish(out, buf)
