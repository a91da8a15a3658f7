"""Elementwise arithmetic and math, registered from tables.

Every op computes in the dtype ATen computes in (`torchedge.kernels.dtypes`) and casts
into ``out`` in the same NumPy call where it can (``dtype=`` plus ``casting="unsafe"``).
The ``.Scalar_out`` overloads share the tensor kernels: a Python number is simply an
operand of lower priority in `result_type`.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import (BOOL, accumulate_dtype, can_cast, category, float_result_type,
                                      result_type)
from torchedge.kernels.portable.common import as_scalar, check, finish, quiet, scratch, write
from torchedge.kernels.portable.special import erf
from torchedge.kernels.registry import register_kernel

__all__ = ["binary", "compute_dtype", "operand", "SAME", "FLOAT"]

# How an op turns the operands' result_type into the dtype it computes in.
SAME = "same"  # the promoted dtype itself
FLOAT = "float"  # bool and integers compute in the default float dtype (ATen's int_to_float)


def compute_dtype(rule: str, *operands) -> np.dtype:
    return float_result_type(*operands) if rule == FLOAT else result_type(*operands)


def operand(value, dtype):
    """An operand ready for a ufunc computing in ``dtype`` (Python numbers wrap like C++)."""
    return value if isinstance(value, np.ndarray) else as_scalar(value, dtype)


def _check_out(op: str, dtype, out: np.ndarray) -> None:
    check(can_cast(dtype, out.dtype), op, f"result type {dtype} can't be cast to the desired output type {out.dtype}")


def _check_kind(op: str, dtype, kinds: str) -> None:
    """``kinds``: the categories allowed, 'b' bool, 'i' integer, 'f' floating."""
    allowed = {"b": 0, "i": 1, "f": 2}
    check(category(dtype) in {allowed[k] for k in kinds}, op, f"is not implemented for dtype {dtype}")


def binary(op: str, fn, rule: str, a, b, out: np.ndarray, kinds: str = "bif") -> None:
    """Run ``fn(a, b, out, dtype)`` in the dtype ``rule`` picks, after ATen's checks."""
    dtype = compute_dtype(rule, a, b)
    _check_kind(op, dtype, kinds)
    _check_out(op, dtype, out)
    with quiet():
        fn(operand(a, dtype), operand(b, dtype), out, dtype)


def _ufunc2(ufunc):
    def fn(a, b, out, dtype):
        ufunc(a, b, out=out, dtype=dtype, casting="unsafe")

    return fn


# -- unary ---------------------------------------------------------------------------


def _ufunc1(ufunc):
    def fn(x, buf):
        ufunc(x, out=buf, dtype=buf.dtype, casting="unsafe")

    return fn


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


# op, computation fn(x, buffer), promotion rule, allowed kinds, opmath (16-bit floats in float32)
_UNARY = [
    ("aten::neg.out", _ufunc1(np.negative), SAME, "if", False),
    ("aten::abs.out", _ufunc1(np.absolute), SAME, "if", False),
    ("aten::sqrt.out", _ufunc1(np.sqrt), FLOAT, "bif", False),
    ("aten::rsqrt.out", _rsqrt, FLOAT, "bif", True),
    ("aten::exp.out", _ufunc1(np.exp), FLOAT, "bif", False),
    ("aten::log.out", _ufunc1(np.log), FLOAT, "bif", False),
    ("aten::sin.out", _ufunc1(np.sin), FLOAT, "bif", False),
    ("aten::cos.out", _ufunc1(np.cos), FLOAT, "bif", False),
    ("aten::tanh.out", _ufunc1(np.tanh), FLOAT, "bif", False),
    ("aten::sigmoid.out", _sigmoid, FLOAT, "bif", True),
    ("aten::erf.out", _erf, FLOAT, "bif", True),
]


def _unary_kernel(op: str, fn, rule: str, kinds: str, opmath: bool):
    def kernel(self, out):
        dtype = compute_dtype(rule, self)
        _check_kind(op, dtype, kinds)
        _check_out(op, dtype, out)
        buf = scratch(out, accumulate_dtype(dtype) if opmath else dtype)
        with quiet():
            fn(self, buf)
        finish(out, buf)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


for _op, _fn, _rule, _kinds, _opmath in _UNARY:
    register_kernel(_op)(_unary_kernel(_op, _fn, _rule, _kinds, _opmath))


@register_kernel("aten::logical_not.out")
def logical_not(self, out):
    np.logical_not(self, out=out, casting="unsafe")


# -- binary ----------------------------------------------------------------------------


def _trunc_divide(a, b, out, dtype):
    if category(dtype) == 2:
        np.divide(a, b, out=out, dtype=dtype, casting="unsafe")
        np.trunc(out, out=out)
        return
    quotient = np.floor_divide(a, b, dtype=dtype)
    # floor and trunc differ where the division is inexact and the signs differ
    quotient += (np.remainder(a, b, dtype=dtype) != 0) & ((a < 0) != (b < 0))
    write(out, quotient)


def _check_int_divisor(op: str, b, dtype) -> None:
    if category(dtype) < 2:
        check(not np.any(np.asarray(b) == 0), op, "ZeroDivisionError (integer division by zero)")


_ROUNDED_DIVIDE = {"trunc": _trunc_divide, "floor": _ufunc2(np.floor_divide)}


@register_kernel("aten::div.out_mode", "aten::div.Scalar_mode_out")
def div_mode(self, other, rounding_mode, out):
    op = "aten::div.out_mode"
    if rounding_mode is None:
        return div(self, other, out)
    check(rounding_mode in _ROUNDED_DIVIDE, op, f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    _check_int_divisor(op, other, result_type(self, other))
    binary(op, _ROUNDED_DIVIDE[rounding_mode], SAME, self, other, out, kinds="if")


@register_kernel("aten::div.out", "aten::div.Scalar_out")
def div(self, other, out):
    binary("aten::div.out", _ufunc2(np.true_divide), FLOAT, self, other, out)


def _is_bool(value) -> bool:
    return value.dtype == BOOL if isinstance(value, np.ndarray) else isinstance(value, bool)


def _alpha_kernel(op: str, ufunc, kinds: str, reverse: bool = False):
    """``self (+|-) alpha * other`` (``rsub``: ``other - alpha * self``)."""
    subtract = ufunc is np.subtract

    def fn(a, b, out, dtype, alpha):
        if reverse:
            a, b = b, a
        if alpha != 1:
            b = np.multiply(b, as_scalar(alpha, dtype), dtype=dtype)
        ufunc(a, b, out=out, dtype=dtype, casting="unsafe")

    def kernel(self, other, alpha, out):
        check(not (subtract and (_is_bool(self) or _is_bool(other))), op,
              "subtraction with a bool operand is not supported (use logical_not to invert a mask)")
        dtype = result_type(self, other)
        if category(dtype) < 2:
            check(not isinstance(alpha, float), op,
                  "for integral input tensors, argument alpha must not be a floating point number")
        binary(op, lambda a, b, o, dt: fn(a, b, o, dt, alpha), SAME, self, other, out, kinds)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


register_kernel("aten::add.out", "aten::add.Scalar_out")(_alpha_kernel("aten::add.out", np.add, "bif"))
register_kernel("aten::sub.out", "aten::sub.Scalar_out")(_alpha_kernel("aten::sub.out", np.subtract, "if"))
register_kernel("aten::rsub.Scalar_out")(_alpha_kernel("aten::rsub.Scalar_out", np.subtract, "if", reverse=True))


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
    if category(dtype) == 2:
        np.power(a, b, out=out, dtype=dtype, casting="unsafe")
    else:
        _integer_power(a, b, out, dtype)


@register_kernel("aten::pow.Tensor_Tensor_out", "aten::pow.Tensor_Scalar_out", "aten::pow.Scalar_out")
def power(self, exponent, out):
    op = "aten::pow"
    if not isinstance(exponent, np.ndarray) and category(result_type(self, exponent)) < 2:
        check(exponent >= 0, op, "integers to negative integer powers are not allowed")
    binary(op, _power, SAME, self, exponent, out, kinds="if")


# op names, ufunc, allowed kinds
_BINARY = [
    (("aten::mul.out", "aten::mul.Scalar_out"), np.multiply, "bif"),
    (("aten::minimum.out",), np.minimum, "bif"),
    (("aten::maximum.out",), np.maximum, "bif"),
    (("aten::bitwise_and.Tensor_out", "aten::bitwise_and.Scalar_out"), np.bitwise_and, "bi"),
    (("aten::bitwise_or.Tensor_out", "aten::bitwise_or.Scalar_out"), np.bitwise_or, "bi"),
    (("aten::bitwise_xor.Tensor_out", "aten::bitwise_xor.Scalar_out"), np.bitwise_xor, "bi"),
]


def _binary_kernel(op: str, ufunc, kinds: str):
    fn = _ufunc2(ufunc)

    def kernel(self, other, out):
        binary(op, fn, SAME, self, other, out, kinds)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


for _ops, _ufunc, _kinds in _BINARY:
    register_kernel(*_ops)(_binary_kernel(_ops[0], _ufunc, _kinds))


def _logical_kernel(ufunc):
    def kernel(self, other, out):
        ufunc(self, other, out=out, casting="unsafe")

    kernel.__name__ = ufunc.__name__
    return kernel


for _name, _ufunc in [("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor)]:
    register_kernel(f"aten::logical_{_name}.out")(_logical_kernel(_ufunc))
