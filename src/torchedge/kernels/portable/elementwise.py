"""Elementwise arithmetic and math, registered from tables.

Every op computes in the dtype ATen computes in (`torchedge.kernels.dtypes`), and float16
and bfloat16 results are computed in float32 (ATen's "opmath") and rounded once into ``out``:
a single NumPy ufunc does that by itself (NumPy's and ml_dtypes' 16-bit loops compute in
float32), computations of several steps get a float32 buffer (`opmath_buffer`).
The ``.Scalar_out`` overloads share the tensor kernels: a Python number is simply an
operand of lower priority in `result_type`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from torchedge.kernels.dtypes import (
    BOOL,
    accumulate_dtype,
    can_cast,
    category,
    float_result_type,
    is_floating,
    result_type,
)
from torchedge.kernels.portable.common import as_scalar, check, fail, quiet, write
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.portable.special import erf, erfinv
from torchedge.kernels.registry import register_kernel

__all__ = [
    "binary",
    "unary_kernel",
    "compute_dtype",
    "operand",
    "SAME",
    "FLOAT",
    "work_buffer",
    "opmath_buffer",
    "store",
    "check_same_dtype",
]

# How an op turns the operands' result_type into the dtype it computes in.
SAME = "same"  # the promoted dtype itself
FLOAT = "float"  # bool and integers compute in the default float dtype (ATen's int_to_float)


def compute_dtype(rule: str, *operands) -> np.dtype:
    return float_result_type(*operands) if rule == FLOAT else result_type(*operands)


def operand(value, dtype):
    """An operand ready for a ufunc computing in ``dtype`` (Python numbers wrap like C++)."""
    if not isinstance(value, np.ndarray):
        return as_scalar(value, dtype)
    if value.dtype != dtype and dtype.name == "bfloat16":  # ml_dtypes' loops don't cast their inputs
        return value.astype(dtype)
    return value


def work_buffer(out: np.ndarray, dtype, *inputs) -> np.ndarray:
    """``out`` itself when it has ``dtype`` and overlaps no input array, else a fresh buffer
    of out's shape (so multi-step computations may re-read their inputs)."""
    if out.dtype == dtype and not any(isinstance(x, np.ndarray) and np.may_share_memory(out, x) for x in inputs):
        return out
    return np.empty(out.shape, dtype)


def opmath_buffer(out: np.ndarray, dtype, *inputs) -> np.ndarray:
    """Where an op whose result type is ``dtype`` computes: a `work_buffer` in ATen's opmath
    dtype (float32 for float16 and bfloat16). Pass it to `store` when done."""
    opmath = accumulate_dtype(dtype)
    if opmath != dtype:
        return np.empty(out.shape, opmath)
    return work_buffer(out, dtype, *inputs)


def store(out: np.ndarray, buffer: np.ndarray, dtype) -> None:
    """Round a buffer into ``out`` once, through the result type ``dtype`` when out differs."""
    if buffer is out:
        return
    with quiet():  # overflow to inf is the IEEE result
        if buffer.dtype != dtype and out.dtype != dtype:
            buffer = buffer.astype(dtype)
        write(out, buffer)


def _check_out(op: str, dtype, out: np.ndarray) -> None:
    if not can_cast(dtype, out.dtype):
        fail(op, f"result type {dtype} can't be cast to the desired output type {out.dtype}")


def check_same_dtype(op: str, dtype, out: np.ndarray) -> None:
    """ATen's unary ops (and activations) write only into an out of the input's dtype."""
    if out.dtype != dtype:
        fail(op, f"expected out to have dtype {dtype} (the input's), got {out.dtype}")


_CATEGORY_LETTERS = "bifc"  # category 0 bool, 1 integer, 2 floating, 3 complex


def _check_kind(op: str, dtype, kinds: str) -> None:
    """``kinds``: the categories allowed, 'b' bool, 'i' integer, 'f' floating."""
    if _CATEGORY_LETTERS[category(dtype)] not in kinds:
        fail(op, f"is not implemented for dtype {dtype}")


_FAST_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})  # their own opmath dtype


def _same_float(a, b, out: np.ndarray) -> bool:
    """Whether ``a`` is an array, and ``b`` an array or a Python float, all of out's float32 or
    float64 dtype: then every promotion rule gives that dtype, and no check can fail."""
    dtype = out.dtype
    return (
        dtype in _FAST_FLOATS
        and type(a) is np.ndarray
        and a.dtype == dtype
        and (type(b) is float or (type(b) is np.ndarray and b.dtype == dtype))
    )


def binary(op: str, fn, rule: str, a, b, out: np.ndarray, kinds: str = "bif", opmath: bool = False) -> None:
    """Run ``fn(a, b, buffer, buffer.dtype)`` in the dtype ``rule`` picks, after ATen's checks,
    then round the buffer into ``out``. The buffer is out itself where it has that dtype,
    for a single ufunc; ``opmath=True`` gives fn an `opmath_buffer` for several steps."""
    if "f" in kinds and _same_float(a, b, out):  # the common case, without the promotion machinery
        dtype = out.dtype
        buffer = work_buffer(out, dtype, a, b) if opmath else out
        with quiet():
            fn(a, b if type(b) is np.ndarray else dtype.type(b), buffer, dtype)
        if buffer is not out:
            write(out, buffer)
        return
    dtype = compute_dtype(rule, a, b)
    _check_kind(op, dtype, kinds)
    _check_out(op, dtype, out)
    buffer = opmath_buffer(out, dtype, a, b) if opmath else work_buffer(out, dtype)
    with quiet():
        fn(operand(a, dtype), operand(b, dtype), buffer, buffer.dtype)
    store(out, buffer, dtype)


def _ufunc2(ufunc):
    def fn(a, b, out, dtype):
        ufunc(a, b, out=out, dtype=dtype, casting="unsafe")

    return fn


# -- unary ---------------------------------------------------------------------------


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

# op name, computation (a ufunc, or fn(x, buffer) for several steps), promotion rule, allowed kinds (b, i, f),
# whether the kernel is correct with out aliasing self (`OpTraits.inplace_safe`)
_UNARY = [
    ("aten::neg.out", np.negative, SAME, "if", True),
    ("aten::abs.out", np.absolute, SAME, "if", True),
    ("aten::sign.out", _sign, SAME, "bif", False),
    ("aten::ceil.out", _whole(np.ceil), SAME, "if", False),
    ("aten::floor.out", _whole(np.floor), SAME, "if", False),
    ("aten::round.out", _whole(np.rint), SAME, "if", False),  # half to even, like std::nearbyint
    ("aten::trunc.out", _whole(np.trunc), SAME, "if", False),
    ("aten::bitwise_not.out", np.invert, SAME, "bi", False),
    ("aten::sqrt.out", np.sqrt, FLOAT, "bif", True),
    ("aten::rsqrt.out", _rsqrt, FLOAT, "bif", True),
    ("aten::reciprocal.out", np.reciprocal, FLOAT, "bif", False),
    ("aten::exp.out", np.exp, FLOAT, "bif", True),
    ("aten::exp2.out", np.exp2, FLOAT, "bif", False),
    ("aten::expm1.out", np.expm1, FLOAT, "bif", False),
    ("aten::log.out", np.log, FLOAT, "bif", False),
    ("aten::log2.out", np.log2, FLOAT, "bif", False),
    ("aten::log10.out", np.log10, FLOAT, "bif", False),
    ("aten::log1p.out", np.log1p, FLOAT, "bif", False),
    ("aten::sin.out", np.sin, FLOAT, "bif", False),
    ("aten::cos.out", np.cos, FLOAT, "bif", False),
    ("aten::tan.out", np.tan, FLOAT, "bif", False),
    ("aten::asin.out", np.arcsin, FLOAT, "bif", False),
    ("aten::acos.out", np.arccos, FLOAT, "bif", False),
    ("aten::atan.out", np.arctan, FLOAT, "bif", False),
    ("aten::sinh.out", np.sinh, FLOAT, "bif", False),
    ("aten::cosh.out", np.cosh, FLOAT, "bif", False),
    ("aten::tanh.out", np.tanh, FLOAT, "bif", True),
    ("aten::asinh.out", np.arcsinh, FLOAT, "bif", False),
    ("aten::acosh.out", np.arccosh, FLOAT, "bif", False),
    ("aten::atanh.out", np.arctanh, FLOAT, "bif", False),
    ("aten::sigmoid.out", _sigmoid, FLOAT, "bif", True),
    ("aten::erf.out", _erf, FLOAT, "bif", False),
    ("aten::erfinv.out", _erfinv, FLOAT, "bif", False),
]


def unary_kernel(op: str, fn, rule: str, kinds: str):
    """The kernel of a one-input op: a ufunc, or ``fn(self, buffer)`` on an `opmath_buffer`."""

    ufunc = isinstance(fn, np.ufunc)
    reads_once = ufunc or fn in _READS_INPUT_ONCE

    def kernel(self, out):
        dtype = self.dtype
        if dtype in _FAST_FLOATS and out.dtype == dtype and "f" in kinds and type(self) is np.ndarray:
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
        _check_kind(op, dtype, kinds)
        if rule == SAME:
            check_same_dtype(op, dtype, out)
        else:
            _check_out(op, dtype, out)
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


@register_kernel("aten::round.decimals_out", shape=broadcast_inputs)
def round_decimals(self, decimals, out):
    """``nearbyint(x * 10**d) / 10**d`` (``nearbyint(x / 10**-d) * 10**-d`` for d < 0) in opmath."""
    op = "aten::round.decimals_out"
    _check_kind(op, self.dtype, "f")
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


# -- binary ----------------------------------------------------------------------------


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
    binary("aten::div.out", _ufunc2(np.true_divide), FLOAT, self, other, out)


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
        if type(alpha) is int and alpha == 1 and _same_float(self, other, out):
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
        if not is_floating(dtype):
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
    _alpha_kernel("aten::add.out", np.add, "bif")
)
register_kernel("aten::sub.out", "aten::sub.Scalar_out", shape=broadcast_inputs, inplace_safe=True)(
    _alpha_kernel("aten::sub.out", np.subtract, "if")
)
register_kernel("aten::rsub.Scalar_out", shape=broadcast_inputs)(
    _alpha_kernel("aten::rsub.Scalar_out", np.subtract, "if", reverse=True)
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
    if is_floating(dtype):
        np.power(a, b, out=out, dtype=dtype, casting="unsafe")
    else:
        _integer_power(a, b, out, dtype)


def _product_power(n: int):
    """``x ** n`` for a small positive integer n by repeated multiplication (binary powering):
    ATen's own method for 2 and 3 (``x * x``, ``x * x * x``), within an ulp or two of a
    correctly rounded pow for the others, and a hundred times faster than NumPy's pow."""

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
        _product_power(n // 2)(square, buf)
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


# Floating-point x ** e for exponents ATen (or repeated multiplication) computes without pow:
# 2, 3, -2 as products (PowKernel.cpp), 0.5, -0.5, -1 as sqrt, rsqrt and reciprocal.
_SCALAR_POWERS: dict[float, Callable] = {n: _product_power(n) for n in range(2, 9)}
_SCALAR_POWERS.update(
    {
        -2: _reciprocal_of(_product_power(2)),
        0.5: _sqrt,
        -0.5: _reciprocal_of(_sqrt),
        -1: _reciprocal_of(_product_power(1)),
    }
)
_REREADS_INPUT = frozenset({3, 5, 7})  # their buffer must not be the input's memory


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
def power(self, exponent, out):
    op = "aten::pow"
    if not isinstance(exponent, np.ndarray):
        dtype = result_type(self, exponent)
        check(is_floating(dtype) or exponent >= 0, op, "integers to negative integer powers are not allowed")
        if exponent in (0, 1):  # ATen fills ones or copies, for every dtype (bool included)
            _check_out(op, dtype, out)
            write(out, np.ones((), dtype) if exponent == 0 else self.astype(dtype, copy=False))
            return
        fn = _SCALAR_POWERS.get(exponent) if is_floating(dtype) and isinstance(self, np.ndarray) else None
        if dtype == np.float16 and exponent in (0.5, -0.5, -1):
            fn = None  # ATen's Half kernel is std::pow for these too (pow(-0.0, 0.5) is +0.0, not sqrt's -0.0)
        elif dtype.kind == "V" and exponent in (3, -2):  # bfloat16, ml_dtypes' only 'V' dtype
            fn = _BFLOAT16_POWERS[exponent]
        if fn is not None:
            _check_out(op, dtype, out)
            buf = opmath_buffer(out, dtype, *((self,) if exponent in _REREADS_INPUT else ()))
            x = self if self.dtype.kind != "V" or fn in _BFLOAT16_POWERS.values() else self.astype(buf.dtype)
            with quiet():
                fn(x, buf)
            store(out, buf, dtype)
            return
    binary(op, _power, SAME, self, exponent, out, kinds="if")


# op names, ufunc, allowed kinds, whether correct with out aliasing self
_BINARY = [
    (("aten::mul.out", "aten::mul.Scalar_out"), np.multiply, "bif", True),
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
