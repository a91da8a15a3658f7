"""One-input arithmetic and math: sign, rounding, roots, exp and log, trigonometry, sigmoid, erf.

`unary_kernel` builds the kernel of each op in the `_UNARY` table (the activations use it too);
``round.decimals`` and ``logical_not`` have kernels of their own.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, is_floating
from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.portable.elementwise import (
    FAST_FLOATS,
    FLOAT,
    SAME,
    check_kind,
    check_out,
    check_same_dtype,
    compute_dtype,
    opmath_buffer,
    store,
    work_buffer,
)
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.portable.special import erf, erfinv
from torchedge.kernels.registry import register_kernel

__all__ = ["unary_kernel", "abs_", "round_decimals", "logical_not"]


def _rsqrt(x, buf):
    np.sqrt(x, out=buf, dtype=buf.dtype, casting="unsafe")
    np.divide(1, buf, out=buf)


def _sigmoid(x, buf):
    np.negative(x, out=buf, dtype=buf.dtype, casting="unsafe")
    np.exp(buf, out=buf)
    buf += 1
    np.reciprocal(buf, out=buf)


def _erf(x, buf):
    write(buf, erf(x, single=buf.itemsize < 8))


def _erfinv(x, buf):
    write(buf, erfinv(x, single=buf.itemsize < 8).reshape(buf.shape))


def _whole(ufunc):
    """ceil, floor, round, trunc: integers are already whole numbers (ATen copies them)."""

    def fn(x, buf):
        if is_floating(buf.dtype):
            ufunc(x, out=buf, dtype=buf.dtype, casting="unsafe")
        else:
            write(buf, x)

    return fn


def _sign(x, buf):
    """``(0 < x) - (x < 0)``: 0 for nan and both zeros; bool stays as it is."""
    if buf.dtype == BOOL:
        write(buf, x)
        return
    np.greater(x, 0, out=buf, casting="unsafe")
    np.subtract(buf, np.less(x, 0), out=buf, casting="unsafe")


# multi-step computations that read x only in their first step: their buffer may be x's memory
_READS_INPUT_ONCE = {_rsqrt, _sigmoid, _erf, _erfinv}

# op name, computation (a ufunc, or fn(x, buffer) for several steps), promotion rule, allowed kinds (b, i, f, c),
# whether the kernel is correct with out aliasing self (`OpTraits.inplace_safe`)
_UNARY = [
    ("aten::neg.out", np.negative, SAME, "ifc", True),
    ("aten::sign.out", _sign, SAME, "bif", False),
    ("aten::ceil.out", _whole(np.ceil), SAME, "if", False),
    ("aten::floor.out", _whole(np.floor), SAME, "if", False),
    ("aten::round.out", _whole(np.rint), SAME, "if", False),  # half to even, like std::nearbyint
    ("aten::trunc.out", _whole(np.trunc), SAME, "if", False),
    ("aten::bitwise_not.out", np.invert, SAME, "bi", False),
    ("aten::sqrt.out", np.sqrt, FLOAT, "bifc", True),
    ("aten::rsqrt.out", _rsqrt, FLOAT, "bifc", True),
    ("aten::reciprocal.out", np.reciprocal, FLOAT, "bifc", False),
    ("aten::exp.out", np.exp, FLOAT, "bifc", True),
    ("aten::exp2.out", np.exp2, FLOAT, "bif", False),
    ("aten::expm1.out", np.expm1, FLOAT, "bifc", False),
    ("aten::log.out", np.log, FLOAT, "bifc", False),
    ("aten::log2.out", np.log2, FLOAT, "bifc", False),
    ("aten::log10.out", np.log10, FLOAT, "bifc", False),
    ("aten::log1p.out", np.log1p, FLOAT, "bifc", False),
    ("aten::sin.out", np.sin, FLOAT, "bifc", False),
    ("aten::cos.out", np.cos, FLOAT, "bifc", False),
    ("aten::tan.out", np.tan, FLOAT, "bifc", False),
    ("aten::asin.out", np.arcsin, FLOAT, "bifc", False),
    ("aten::acos.out", np.arccos, FLOAT, "bifc", False),
    ("aten::atan.out", np.arctan, FLOAT, "bifc", False),
    ("aten::sinh.out", np.sinh, FLOAT, "bifc", False),
    ("aten::cosh.out", np.cosh, FLOAT, "bifc", False),
    ("aten::tanh.out", np.tanh, FLOAT, "bifc", True),
    ("aten::asinh.out", np.arcsinh, FLOAT, "bifc", False),
    ("aten::acosh.out", np.arccosh, FLOAT, "bifc", False),
    ("aten::atanh.out", np.arctanh, FLOAT, "bifc", False),
    ("aten::sigmoid.out", _sigmoid, FLOAT, "bifc", True),
    ("aten::erf.out", _erf, FLOAT, "bif", False),
    ("aten::erfinv.out", _erfinv, FLOAT, "bif", False),
]


def unary_kernel(op: str, fn, rule: str, kinds: str):
    """The kernel of a one-input op: a ufunc, or ``fn(self, buffer)`` on an `opmath_buffer`."""

    ufunc = isinstance(fn, np.ufunc)
    reads_once = ufunc or fn in _READS_INPUT_ONCE

    def kernel(self, out):
        dtype = self.dtype
        if dtype in FAST_FLOATS and out.dtype == dtype and "f" in kinds and type(self) is np.ndarray:
            # float32/float64 in, the same out: no promotion or check can apply
            with quiet():
                if ufunc:
                    fn(self, out=out)
                elif reads_once or not np.may_share_memory(out, self):
                    fn(self, out)
                else:
                    buf = np.empty(out.shape, dtype)
                    fn(self, buf)
                    np.copyto(out, buf)
            return
        dtype = compute_dtype(rule, self)
        check_kind(op, dtype, kinds)
        if rule == SAME:
            check_same_dtype(op, dtype, out)
        else:
            check_out(op, dtype, out)
        with quiet():
            if isinstance(fn, np.ufunc):
                buf = work_buffer(out, dtype)
                fn(self, out=buf, dtype=dtype, casting="unsafe")
            else:
                buf = opmath_buffer(out, dtype, self)
                fn(self, buf)
        store(out, buf, dtype)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


for _op, _fn, _rule, _kinds, _inplace_safe in _UNARY:
    register_kernel(_op, shape=broadcast_inputs, inplace_safe=_inplace_safe)(unary_kernel(_op, _fn, _rule, _kinds))


_real_abs = unary_kernel("aten::abs.out", np.absolute, SAME, "if")


@register_kernel("aten::abs.out", shape=broadcast_inputs, inplace_safe=True)
def abs_(self, out):
    """Magnitudes; of a complex tensor, in the real dtype of its parts (as ATen returns them)."""
    if self.dtype.kind != "c":
        _real_abs(self, out)
        return
    real = np.finfo(self.dtype).dtype
    check(
        out.dtype == real, "aten::abs.out", f"expected out to have dtype {real} (of the input's parts), got {out.dtype}"
    )
    np.absolute(self, out=out)


@register_kernel("aten::round.decimals_out", shape=broadcast_inputs)
def round_decimals(self, decimals, out):
    """``nearbyint(x * 10**d) / 10**d`` (``nearbyint(x / 10**-d) * 10**-d`` for d < 0) in opmath."""
    op = "aten::round.decimals_out"
    check_kind(op, self.dtype, "f")
    check_same_dtype(op, self.dtype, out)
    buf = opmath_buffer(out, self.dtype, self)
    with quiet():
        scale = buf.dtype.type(np.float64(10.0) ** abs(decimals))  # inf past the dtype's range, as in C++
        scale_in, scale_back = (np.multiply, np.divide) if decimals >= 0 else (np.divide, np.multiply)
        scale_in(self, scale, out=buf, dtype=buf.dtype, casting="unsafe")
        np.rint(buf, out=buf)
        scale_back(buf, scale, out=buf)
    store(out, buf, self.dtype)


@register_kernel("aten::logical_not.out", shape=broadcast_inputs)
def logical_not(self, out):
    np.logical_not(self, out=out, casting="unsafe")
