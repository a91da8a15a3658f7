"""Comparisons and selection: eq/ne/lt/le/gt/ge, clamp, where."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, can_cast, result_type
from torchedge.kernels.portable.common import check, finish, quiet, scratch, write
from torchedge.kernels.portable.elementwise import operand
from torchedge.kernels.registry import register_kernel

__all__ = ["clamp", "where"]


def _comparison_kernel(name: str, ufunc):
    def kernel(self, other, out):
        # Compare in the promoted dtype; ATen lets the bool result land in any out dtype.
        dtype = result_type(self, other)
        with quiet():
            ufunc(operand(self, dtype), operand(other, dtype), out=out, signature=(dtype, dtype, BOOL),
                  casting="unsafe")

    kernel.__name__ = name
    return kernel


for _name, _ufunc in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                      ("gt", np.greater), ("ge", np.greater_equal)]:
    register_kernel(f"aten::{_name}.Scalar_out", f"aten::{_name}.Tensor_out")(_comparison_kernel(_name, _ufunc))


@register_kernel("aten::clamp.out", "aten::clamp.Tensor_out")
def clamp(self, min, max, out):
    """``min(max(self, min), max)`` in the promoted dtype; nan in self stays nan."""
    op = "aten::clamp.out"
    check(min is not None or max is not None, op, "at least one of 'min' or 'max' must not be None")
    dtype = result_type(self, min, max)
    check(can_cast(dtype, out.dtype), op, f"result type {dtype} can't be cast to the desired output type {out.dtype}")
    buf = scratch(out, dtype)
    source = self
    with quiet():
        if min is not None:
            np.maximum(source, operand(min, dtype), out=buf, dtype=dtype, casting="unsafe")
            source = buf
        if max is not None:
            np.minimum(source, operand(max, dtype), out=buf, dtype=dtype, casting="unsafe")
    finish(out, buf)


@register_kernel("aten::where.self_out")
def where(condition, self, other, out):
    dtype = result_type(self, other)
    self, other = (operand(v, dtype) for v in (self, other))
    if out.dtype != dtype:  # cast through the promoted dtype, as ATen does
        self, other = self.astype(dtype, copy=False), other.astype(dtype, copy=False)
    condition = condition.astype(BOOL, copy=False)
    if np.may_share_memory(out, self) or np.may_share_memory(out, other):  # in place: no two-step copy
        write(out, np.where(condition, self, other))
        return
    write(out, other)
    np.copyto(out, self, casting="unsafe", where=condition)
