"""Two-operand arithmetic: division and remainders, add and sub with alpha, pow, mul,
minimum and maximum, and the bitwise and logical ops.

Each kernel runs through `binary` (`torchedge.kernels.portable.elementwise`), which applies
ATen's promotion and checks; pow computes the scalar exponents that ATen computes without
``std::pow`` its way (`SCALAR_POWERS`; the kernel takes another table of the same contract).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from torchedge.kernels.dtypes import BOOL, category, is_floating, result_type
from torchedge.kernels.portable.common import as_scalar, check, quiet, write
from torchedge.kernels.portable.elementwise import FLOAT, SAME, binary, check_out, opmath_buffer, same_float, store
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.registry import register_kernel

__all__ = ["div", "div_mode", "atan2", "power", "product_power", "SCALAR_POWERS"]


def _ufunc2(ufunc):
    def fn(a, b, out, dtype):
        ufunc(a, b, out=out, dtype=dtype, casting="unsafe")

    return fn


def _trunc_divide(a, b, out, dtype):
    if is_floating(dtype):
        np.divide(a, b, out=out, dtype=dtype, casting="unsafe")
        np.trunc(out, out=out)
        return
    quotient = np.floor_divide(a, b, dtype=dtype)
    # floor and trunc differ where the division is inexact and the signs differ
    quotient += (np.remainder(a, b, dtype=dtype) != 0) & ((a < 0) != (b < 0))
    write(out, quotient)


def _remainder(a, b, out, dtype):
    """Python's modulo (the result takes the divisor's sign), as ATen computes it."""
    if not is_floating(dtype):
        np.remainder(a, b, out=out, dtype=dtype, casting="unsafe")
        return
    # ATen: fmod, then add the divisor to a nonzero result whose sign differs from the divisor's
    # (NumPy's remainder differs: it returns +0.0 for -4 % 2 and other signs of zero)
    np.fmod(a, b, out=out, dtype=dtype, casting="unsafe")
    fix = (out != 0) & ((out < 0) != (b < 0))
    np.add(out, b, out=out, where=fix, dtype=dtype, casting="unsafe")


def _check_int_divisor(op: str, b, dtype) -> None:
    if not is_floating(dtype):
        check(not np.any(np.asarray(b) == 0), op, "ZeroDivisionError (integer division by zero)")


def _division_kernel(op: str, fn, opmath: bool = False):
    """floor_divide, fmod, remainder: integers refuse a zero divisor, floats give inf/nan."""

    def kernel(self, other, out):
        _check_int_divisor(op, other, result_type(self, other))
        binary(op, fn, SAME, self, other, out, kinds="if", opmath=opmath)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


# op names, computation, whether it takes several steps (see `binary`)
_DIVISIONS = [
    (("aten::floor_divide.out", "aten::floor_divide.Scalar_out"), _ufunc2(np.floor_divide), False),
    (("aten::fmod.Tensor_out", "aten::fmod.Scalar_out"), _ufunc2(np.fmod), False),
    (
        ("aten::remainder.Tensor_out", "aten::remainder.Scalar_out", "aten::remainder.Scalar_Tensor_out"),
        _remainder,
        True,
    ),
]
for _ops, _fn, _opmath in _DIVISIONS:
    register_kernel(*_ops, shape=broadcast_inputs)(_division_kernel(_ops[0], _fn, _opmath))

_ROUNDED_DIVIDE = {
    mode: _division_kernel("aten::div.out_mode", fn)
    for mode, fn in [("trunc", _trunc_divide), ("floor", _ufunc2(np.floor_divide))]
}


@register_kernel("aten::div.out_mode", "aten::div.Scalar_mode_out", shape=broadcast_inputs)
def div_mode(self, other, rounding_mode, out):
    if rounding_mode is None:
        return div(self, other, out)
    check(
        rounding_mode in _ROUNDED_DIVIDE,
        "aten::div.out_mode",
        f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}",
    )
    _ROUNDED_DIVIDE[rounding_mode](self, other, out)


@register_kernel("aten::div.out", "aten::div.Scalar_out", shape=broadcast_inputs, inplace_safe=True)
def div(self, other, out):
    binary("aten::div.out", _ufunc2(np.true_divide), FLOAT, self, other, out, kinds="bifc")


@register_kernel("aten::atan2.out", shape=broadcast_inputs)
def atan2(self, other, out):
    binary("aten::atan2.out", _ufunc2(np.arctan2), FLOAT, self, other, out)


def _is_bool(value) -> bool:
    return value.dtype == BOOL if isinstance(value, np.ndarray) else isinstance(value, bool)


def _alpha_kernel(op: str, ufunc, kinds: str, reverse: bool = False):
    """``self (+|-) alpha * other`` (``rsub``: ``other - alpha * self``)."""
    subtract = ufunc is np.subtract

    def fn(a, b, out, dtype, alpha):
        if reverse:
            a, b = b, a
        if alpha != 1:
            b = np.multiply(b, alpha, dtype=dtype, casting="unsafe")
        ufunc(a, b, out=out, dtype=dtype, casting="unsafe")

    def kernel(self, other, alpha, out):
        if type(alpha) is int and alpha == 1 and same_float(self, other, out):
            with quiet():
                if reverse:
                    ufunc(out.dtype.type(other) if type(other) is float else other, self, out=out)
                else:
                    ufunc(self, out.dtype.type(other) if type(other) is float else other, out=out)
            return
        check(
            not (subtract and (_is_bool(self) or _is_bool(other))),
            op,
            "subtraction with a bool operand is not supported (use logical_not to invert a mask)",
        )
        dtype = result_type(self, other)
        if category(dtype) < 2:  # bool and integers
            check(
                not isinstance(alpha, float),
                op,
                "for integral input tensors, argument alpha must not be a floating point number",
            )
        alpha = as_scalar(alpha, dtype)  # ATen's alpha.to<scalar_t>()
        binary(op, lambda a, b, o, dt: fn(a, b, o, dt, alpha), SAME, self, other, out, kinds, opmath=alpha != 1)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


register_kernel("aten::add.out", "aten::add.Scalar_out", shape=broadcast_inputs, inplace_safe=True)(
    _alpha_kernel("aten::add.out", np.add, "bifc")
)
register_kernel("aten::sub.out", "aten::sub.Scalar_out", shape=broadcast_inputs, inplace_safe=True)(
    _alpha_kernel("aten::sub.out", np.subtract, "ifc")
)
register_kernel("aten::rsub.Scalar_out", shape=broadcast_inputs)(
    _alpha_kernel("aten::rsub.Scalar_out", np.subtract, "ifc", reverse=True)
)


def _integer_power(a, b, out, dtype):
    # ATen: integer x ** negative integer is 1 for x == 1, +-1 for x == -1 and 0 otherwise.
    negative = np.asarray(b) < 0
    if not negative.any():
        np.power(a, b, out=out, dtype=dtype, casting="unsafe")
        return
    result = np.power(a, np.where(negative, 0, b), dtype=dtype)
    odd = np.asarray(b) % 2 != 0
    special = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(dtype)
    write(out, np.where(negative, special, result))


def _power(a, b, out, dtype):
    if is_floating(dtype) or dtype.kind == "c":
        np.power(a, b, out=out, dtype=dtype, casting="unsafe")
    else:
        _integer_power(a, b, out, dtype)


def product_power(n: int):
    """``fn(x, buf)``: ``x ** n`` into ``buf`` for a positive integer n by repeated multiplication
    (binary powering): ATen's own method for 2 and 3 (``x * x``, ``x * x * x``), within an ulp
    or two of a correctly rounded pow for larger n. For odd n >= 3 it reads ``x`` after writing
    ``buf``, which must then be other memory."""

    def fn(x, buf):
        if n == 1:
            np.copyto(buf, x, casting="unsafe")
            return
        if n == 2:
            np.multiply(x, x, out=buf, dtype=buf.dtype, casting="unsafe")
            return
        if n == 3:  # (x * x) * x, ATen's order
            np.multiply(x, x, out=buf, dtype=buf.dtype, casting="unsafe")
            np.multiply(buf, x, out=buf, dtype=buf.dtype, casting="unsafe")
            return
        square = np.multiply(x, x, dtype=buf.dtype, casting="unsafe")
        product_power(n // 2)(square, buf)
        if n % 2:
            np.multiply(buf, x, out=buf, dtype=buf.dtype, casting="unsafe")

    return fn


def _reciprocal_of(fn):
    def reciprocal(x, buf):
        fn(x, buf)
        np.divide(1, buf, out=buf)

    return reciprocal


def _sqrt(x, buf):
    np.sqrt(x, out=buf, dtype=buf.dtype, casting="unsafe")


# Floating-point x ** e for the exponents ATen computes without pow: 2, 3, -2 as products
# (PowKernel.cpp), 0.5, -0.5, -1 as sqrt, rsqrt and reciprocal.
SCALAR_POWERS: dict[float, Callable] = {
    2: product_power(2),
    3: product_power(3),
    -2: _reciprocal_of(product_power(2)),
    0.5: _sqrt,
    -0.5: _reciprocal_of(_sqrt),
    -1: _reciprocal_of(product_power(1)),
}


def _bfloat16_square(x, buf):
    np.multiply(x, x, out=buf, dtype=buf.dtype, casting="unsafe")
    buf[...] = buf.astype(x.dtype)  # ATen rounds x * x to bfloat16 (x is a bfloat16 array here)


def _bfloat16_cube(x, buf):
    _bfloat16_square(x, buf)
    np.multiply(buf, x, out=buf, dtype=buf.dtype, casting="unsafe")


# ATen computes bfloat16's x * x * x and 1 / (x * x) in bfloat16 arithmetic: x * x is rounded first.
_BFLOAT16_POWERS = {3: _bfloat16_cube, -2: _reciprocal_of(_bfloat16_square)}


@register_kernel("aten::pow.Tensor_Scalar_out", shape=broadcast_inputs, inplace_safe=True)
@register_kernel("aten::pow.Tensor_Tensor_out", "aten::pow.Scalar_out", shape=broadcast_inputs)
def power(self, exponent, out, *, powers: Mapping[float, Callable] = SCALAR_POWERS):
    """``self ** exponent``; a float array to a scalar exponent in ``powers`` takes its
    ``fn(x, buf)`` (products for odd exponents >= 3 reread x, so buf is then other memory)."""
    op = "aten::pow"
    if not isinstance(exponent, np.ndarray):
        dtype = result_type(self, exponent)
        check(
            is_floating(dtype) or dtype.kind == "c" or exponent >= 0,
            op,
            "integers to negative integer powers are not allowed",
        )
        if exponent in (0, 1):  # ATen fills ones or copies, for every dtype (bool included)
            check_out(op, dtype, out)
            write(out, np.ones((), dtype) if exponent == 0 else self.astype(dtype, copy=False))
            return
        fn = powers.get(exponent) if is_floating(dtype) and isinstance(self, np.ndarray) else None
        if dtype == np.float16 and exponent in (0.5, -0.5, -1):
            fn = None  # ATen's Half kernel is std::pow for these too (pow(-0.0, 0.5) is +0.0, not sqrt's -0.0)
        elif dtype.kind == "V" and exponent in (3, -2):  # bfloat16, ml_dtypes' only 'V' dtype
            fn = _BFLOAT16_POWERS[exponent]
        if fn is not None:
            check_out(op, dtype, out)
            rereads = exponent >= 3 and exponent % 2 == 1
            buf = opmath_buffer(out, dtype, *((self,) if rereads else ()))
            x = self if self.dtype.kind != "V" or fn in _BFLOAT16_POWERS.values() else self.astype(buf.dtype)
            with quiet():
                fn(x, buf)
            store(out, buf, dtype)
            return
    binary(op, _power, SAME, self, exponent, out, kinds="ifc")


# op names, ufunc, allowed kinds, whether correct with out aliasing self
_BINARY = [
    (("aten::mul.out", "aten::mul.Scalar_out"), np.multiply, "bifc", True),
    (("aten::minimum.out",), np.minimum, "bif", False),
    (("aten::maximum.out",), np.maximum, "bif", False),
    (("aten::bitwise_and.Tensor_out", "aten::bitwise_and.Scalar_out"), np.bitwise_and, "bi", False),
    (("aten::bitwise_or.Tensor_out", "aten::bitwise_or.Scalar_out"), np.bitwise_or, "bi", False),
    (("aten::bitwise_xor.Tensor_out", "aten::bitwise_xor.Scalar_out"), np.bitwise_xor, "bi", False),
]


def _binary_kernel(op: str, ufunc, kinds: str):
    fn = _ufunc2(ufunc)

    def kernel(self, other, out):
        binary(op, fn, SAME, self, other, out, kinds)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


for _ops, _ufunc, _kinds, _inplace_safe in _BINARY:
    _kernel = _binary_kernel(_ops[0], _ufunc, _kinds)
    register_kernel(*_ops, shape=broadcast_inputs, inplace_safe=_inplace_safe)(_kernel)


def _logical_kernel(ufunc):
    def kernel(self, other, out):
        ufunc(self, other, out=out, casting="unsafe")

    kernel.__name__ = ufunc.__name__
    return kernel


for _op, _logical in [
    ("aten::logical_and.out", np.logical_and),
    ("aten::logical_or.out", np.logical_or),
    ("aten::logical_xor.out", np.logical_xor),
]:
    register_kernel(_op, shape=broadcast_inputs)(_logical_kernel(_logical))
