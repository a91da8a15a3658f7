"""Comparisons, predicates and selection: eq/ne/lt/le/gt/ge, isnan/isinf, clamp, where."""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import BOOL, can_cast, is_floating, result_type
from torchedge.kernels.portable import bounds
from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.portable.elementwise import operand, store, work_buffer
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.registry import register_kernel

__all__ = ["clamp", "fast_clamp", "where", "isnan", "isinf", "keep_signed_zeros"]


def _comparison_kernel(name: str, ufunc):
    def kernel(self, other, out):
        # Compare in the promoted dtype; ATen lets the bool result land in any out dtype.
        dtype = result_type(self, other)
        with quiet():
            ufunc(
                operand(self, dtype), operand(other, dtype), out=out, signature=(dtype, dtype, BOOL), casting="unsafe"
            )

    kernel.__name__ = name
    return kernel


# op names (Scalar and Tensor overloads), ufunc
_COMPARISONS = [
    ("aten::eq.Scalar_out", "aten::eq.Tensor_out", np.equal),
    ("aten::ne.Scalar_out", "aten::ne.Tensor_out", np.not_equal),
    ("aten::lt.Scalar_out", "aten::lt.Tensor_out", np.less),
    ("aten::le.Scalar_out", "aten::le.Tensor_out", np.less_equal),
    ("aten::gt.Scalar_out", "aten::gt.Tensor_out", np.greater),
    ("aten::ge.Scalar_out", "aten::ge.Tensor_out", np.greater_equal),
]
for _scalar_op, _tensor_op, _ufunc in _COMPARISONS:
    _kernel = _comparison_kernel(_scalar_op[len("aten::") :].split(".")[0], _ufunc)
    register_kernel(_scalar_op, _tensor_op, shape=broadcast_inputs)(_kernel)


def keep_signed_zeros(result: np.ndarray, self) -> None:
    """Where ``self`` and ``result`` are both zero, give ``result`` the sign of self's zero.

    ATen's max/min-based kernels (clamp, relu) return self when it ties with the bound;
    NumPy's maximum/minimum may return either zero (its SIMD and scalar loops differ).
    """
    zeros = self == 0
    if zeros.any():  # usually not: then this costs one comparison
        np.copyto(result, self, where=zeros & (result == 0), casting="unsafe")


def _float_predicate(name: str, ufunc):
    def kernel(self, out):
        check(out.dtype == BOOL, f"aten::{name}.out", f"expected out to have dtype bool, got {out.dtype}")
        if is_floating(self.dtype):
            ufunc(self, out=out)
        else:  # integers and bool are never nan or infinite
            out[...] = False

    kernel.__name__ = name
    return kernel


isnan = register_kernel("aten::isnan.out", shape=broadcast_inputs)(_float_predicate("isnan", np.isnan))
isinf = register_kernel("aten::isinf.out", shape=broadcast_inputs)(_float_predicate("isinf", np.isinf))


_FAST_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _plain_bound(value) -> bool:
    return value is None or (type(value) in (int, float) and not math.isnan(value))


def fast_clamp(self, min, max, out) -> bool:
    """clamp of a float32/float64 array by number bounds into an out of its dtype, in one
    pass (`bounds.clamp_by_numbers`); False (nothing written) where the general path is needed.
    Where NumPy's clip does not keep ties (`bounds.clip_keeps_ties`), a zero bound can turn -0.0
    into +0.0: then an input holding zeros takes the general path (checked before anything is
    written, as out may be self's memory)."""
    dtype = self.dtype
    if not (
        dtype in _FAST_FLOATS
        and out.dtype == dtype
        and type(self) is np.ndarray
        and _plain_bound(min)
        and _plain_bound(max)
        and (min is not None or max is not None)
    ):
        return False
    if (min == 0 or max == 0) and not bounds.clip_keeps_ties(dtype) and (self == 0).any():
        return False
    with quiet():
        bounds.clamp_by_numbers(self, min, max, out)
    return True


@register_kernel("aten::clamp.out", shape=broadcast_inputs, inplace_safe=True)
@register_kernel("aten::clamp.Tensor_out", shape=broadcast_inputs)
def clamp(self, min, max, out):
    """``min(max(self, min), max)`` in the promoted dtype: min > max gives max, nan anywhere gives nan,
    and a zero equal to a bound keeps its own sign."""
    op = "aten::clamp.out"
    if fast_clamp(self, min, max, out):
        return
    check(min is not None or max is not None, op, "at least one of 'min' or 'max' must not be None")
    dtype = result_type(self, min, max)
    one_tensor_bound = (min is None or max is None) and (isinstance(min, np.ndarray) or isinstance(max, np.ndarray))
    check(dtype != BOOL or one_tensor_bound, op, "is not implemented for bool, except with a single tensor bound")
    check(can_cast(dtype, out.dtype), op, f"result type {dtype} can't be cast to the desired output type {out.dtype}")
    buf = work_buffer(out, dtype, self, min, max)
    source = operand(self, dtype)  # not NumPy's mixed-dtype loop search: ml_dtypes versions differ
    with quiet():
        if min is not None:
            np.maximum(source, operand(min, dtype), out=buf, dtype=dtype, casting="unsafe")
            source = buf
        if max is not None:
            np.minimum(source, operand(max, dtype), out=buf, dtype=dtype, casting="unsafe")
        if is_floating(dtype):
            keep_signed_zeros(buf, self)
    store(out, buf, dtype)


@register_kernel("aten::where.self_out", shape=broadcast_inputs)
def where(condition, self, other, out):
    dtype = result_type(self, other)
    self, other = (operand(v, dtype) for v in (self, other))
    if out.dtype != dtype:  # cast through the promoted dtype, as ATen does
        self, other = self.astype(dtype, copy=False), other.astype(dtype, copy=False)
    condition = condition.astype(BOOL, copy=False)
    if (
        condition.size * 8 <= out.size
        and np.broadcast_shapes(condition.shape, np.shape(self), np.shape(other)) == out.shape
    ):  # a small condition (a mask of rows): one plain copy when it is uniform
        if not condition.any():
            write(out, other)
            return
        if condition.all():
            write(out, self)
            return
    if np.may_share_memory(out, self) or np.may_share_memory(out, other):  # in place: no two-step copy
        write(out, np.where(condition, self, other))
        return
    write(out, other)
    np.copyto(out, self, casting="unsafe", where=condition)
