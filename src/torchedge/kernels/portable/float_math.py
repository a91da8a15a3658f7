"""Floating-point helpers of the C library: hypot, copysign, nextafter, fmax/fmin, frexp,
ldexp, and angle (of a real number).

fmax and fmin ignore a nan operand (nan only when both are) and return ``self`` when the two
compare equal (so ``fmax(-0.0, 0.0)`` is ``-0.0``), as ATen does. ldexp is ATen's
``self * 2.0 ** other``, with 2.0 in self's dtype (float32 for integer inputs).
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import DEFAULT_FLOAT, category, float_result_type, result_type
from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.portable.elementwise import FLOAT, SAME, binary, check_out
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.registry import register_kernel

__all__ = ["hypot", "copysign", "nextafter", "fmax", "fmin", "frexp", "ldexp", "angle"]


def _ufunc2(ufunc):
    def fn(a, b, out, dtype):
        ufunc(a, b, out=out, dtype=dtype, casting="unsafe")

    return fn


@register_kernel("aten::hypot.out", shape=broadcast_inputs)
def hypot(self, other, out):
    binary("aten::hypot.out", _ufunc2(np.hypot), SAME, self, other, out, kinds="f", opmath=True)


@register_kernel("aten::copysign.out", "aten::copysign.Scalar_out", shape=broadcast_inputs)
def copysign(self, other, out):
    binary("aten::copysign.out", _ufunc2(np.copysign), FLOAT, self, other, out, opmath=True)


def _bfloat16_nextafter(a, b, out, dtype):
    """nextafter on the bits (ml_dtypes' bfloat16 has no nextafter loop): one step of the
    magnitude away from or towards zero; 0 steps to the smallest subnormal of b's sign."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype), np.asarray(b, dtype))
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    bits = a.view(np.uint16).astype(np.int32)
    away = (fa < fb) == (fa > 0)  # the magnitude grows
    stepped = (bits + np.where(away, 1, -1)).astype(np.uint16).view(dtype)
    tiny = np.where(fb > 0, np.uint16(1), np.uint16(0x8001)).view(dtype)
    result = np.where(fa == 0, tiny, stepped)
    result = np.where(fa == fb, b, result)
    write(out, np.where(np.isnan(fa) | np.isnan(fb), dtype.type(math.nan), result))


def _nextafter(a, b, out, dtype):
    if dtype.name == "bfloat16":
        _bfloat16_nextafter(a, b, out, dtype)
    else:  # NumPy's float16 loop steps in float16 itself
        np.nextafter(a, b, out=out, dtype=dtype, casting="unsafe")


@register_kernel("aten::nextafter.out", shape=broadcast_inputs)
def nextafter(self, other, out):
    binary("aten::nextafter.out", _nextafter, SAME, self, other, out, kinds="f")


def _nan_ignoring(compare):
    """fmax/fmin: ``self`` where it wins the comparison, ties included, or other is nan."""

    def fn(a, b, out, dtype):
        if category(dtype) < 2:
            (np.maximum if compare is np.greater_equal else np.minimum)(a, b, out=out, dtype=dtype, casting="unsafe")
            return
        a, b = (np.asarray(v).astype(np.float32) if dtype.itemsize == 2 else v for v in (a, b))
        write(out, np.where(compare(a, b) | np.isnan(b), a, b))

    return fn


@register_kernel("aten::fmax.out", shape=broadcast_inputs)
def fmax(self, other, out):
    binary("aten::fmax.out", _nan_ignoring(np.greater_equal), SAME, self, other, out)


@register_kernel("aten::fmin.out", shape=broadcast_inputs)
def fmin(self, other, out):
    binary("aten::fmin.out", _nan_ignoring(np.less_equal), SAME, self, other, out)


def _frexp_shape(op: str, self, mantissa, exponent) -> list[tuple]:
    return [self.shape, self.shape]


@register_kernel("aten::frexp.Tensor_out", shape=_frexp_shape)
def frexp(self, mantissa, exponent):
    """``self = mantissa * 2 ** exponent`` with ``|mantissa|`` in [0.5, 1); 0, inf and nan
    keep their value with exponent 0."""
    op = "aten::frexp.Tensor_out"
    check(category(self.dtype) == 2, op, f"only supports floating-point dtypes, got {self.dtype}")
    check(mantissa.dtype == self.dtype, op, f"expects mantissa to have dtype {self.dtype} but got {mantissa.dtype}")
    check(exponent.dtype == np.int32, op, f"expects exponent to have dtype int32 but got {exponent.dtype}")
    x = self.astype(np.float32) if self.dtype.itemsize == 2 else self  # exact, and the same value
    with quiet():
        m, e = np.frexp(x)
    write(mantissa, m)
    write(exponent, e)


@register_kernel("aten::ldexp.out", shape=broadcast_inputs)
def ldexp(self, other, out):
    """``self * 2 ** other``, as eager computes it: a float self with an integer exponent (wrapped
    to int32, as C's ``ldexp`` takes it) scales exactly, rounding once into the result dtype;
    an integer self multiplies by ``2.0 ** other`` rounded to float32 (0 * inf is nan); a
    float exponent goes through pow."""
    op = "aten::ldexp.out"
    two = np.zeros((), self.dtype if category(self.dtype) == 2 else DEFAULT_FLOAT)
    power_dtype = result_type(two, other)
    dtype = result_type(self, np.zeros((1,) if other.ndim else (), power_dtype))  # the powers' rank
    check_out(op, dtype, out)
    x = self.astype(dtype)
    with quiet():
        if category(other.dtype) < 2 and category(self.dtype) == 2:  # float64 holds these products exactly
            write(out, np.ldexp(x.astype(np.float64), other.astype(np.int32)).astype(dtype))
            return
        if category(other.dtype) < 2:  # integer self: float32 times 2.0 ** other rounded to float32
            powers = np.ldexp(1.0, np.clip(other.astype(np.int64), -2000, 2000).astype(np.int32))
            write(out, np.multiply(x, powers.astype(np.float32)).astype(dtype))
            return
        compute = np.float64 if dtype == np.float64 else np.float32
        powers = np.power(compute(2.0), other.astype(compute)).astype(power_dtype).astype(compute)
        write(out, np.multiply(x.astype(compute), powers).astype(dtype))


@register_kernel("aten::angle.out", shape=broadcast_inputs)
def angle(self, out):
    """The argument of a real number: pi where it is negative, 0 elsewhere, nan for nan."""
    op = "aten::angle.out"
    dtype = float_result_type(self)
    check_out(op, dtype, out)
    with quiet():
        result = np.where(self < 0, dtype.type(math.pi), dtype.type(0))
    if category(self.dtype) == 2:
        nan = np.isnan(self.astype(np.float32) if self.dtype.itemsize == 2 else self)
        result = np.where(nan, self, result)
    write(out, result)
