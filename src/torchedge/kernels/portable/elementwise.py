"""How elementwise kernels compute: the dtype rules, the checks, the buffers, and `binary`.

Every op computes in the dtype ATen computes in (`torchedge.kernels.dtypes`), and float16
and bfloat16 results are computed in float32 (ATen's "opmath") and rounded once into ``out``:
a single NumPy ufunc does that by itself (NumPy's and ml_dtypes' 16-bit loops compute in
float32), computations of several steps get a float32 buffer (`opmath_buffer`).
The ``.Scalar_out`` overloads share the tensor kernels: a Python number is simply an
operand of lower priority in `result_type`.

This module registers no kernel: the elementwise families do (`unary`, `arithmetic`,
`comparison`, `activation`).
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, can_cast, category, convert, float_result_type, result_type
from torchedge.kernels.portable.common import as_scalar, fail, quiet, write

__all__ = [
    "binary",
    "compute_dtype",
    "operand",
    "SAME",
    "FLOAT",
    "FAST_FLOATS",
    "work_buffer",
    "opmath_buffer",
    "store",
    "check_out",
    "check_kind",
    "check_same_dtype",
    "same_float",
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
            buffer = convert(buffer, dtype)
        write(out, buffer)


def check_out(op: str, dtype, out: np.ndarray) -> None:
    if not can_cast(dtype, out.dtype):
        fail(op, f"result type {dtype} can't be cast to the desired output type {out.dtype}")


def check_same_dtype(op: str, dtype, out: np.ndarray) -> None:
    """ATen's unary ops (and activations) write only into an out of the input's dtype."""
    if out.dtype != dtype:
        fail(op, f"expected out to have dtype {dtype} (the input's), got {out.dtype}")


_CATEGORY_LETTERS = "bifc"  # category 0 bool, 1 integer, 2 floating, 3 complex


def check_kind(op: str, dtype, kinds: str) -> None:
    """``kinds``: the categories allowed, 'b' bool, 'i' integer, 'f' floating."""
    if _CATEGORY_LETTERS[category(dtype)] not in kinds:
        fail(op, f"is not implemented for dtype {dtype}")


FAST_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})  # their own opmath dtype


def same_float(a, b, out: np.ndarray) -> bool:
    """Whether ``a`` is an array, and ``b`` an array or a Python float, all of out's float32 or
    float64 dtype: then every promotion rule gives that dtype, and no check can fail."""
    dtype = out.dtype
    return (
        dtype in FAST_FLOATS
        and type(a) is np.ndarray
        and a.dtype == dtype
        and (type(b) is float or (type(b) is np.ndarray and b.dtype == dtype))
    )


def binary(op: str, fn, rule: str, a, b, out: np.ndarray, kinds: str = "bif", opmath: bool = False) -> None:
    """Run ``fn(a, b, buffer, buffer.dtype)`` in the dtype ``rule`` picks, after ATen's checks,
    then round the buffer into ``out``. The buffer is out itself where it has that dtype,
    for a single ufunc; ``opmath=True`` gives fn an `opmath_buffer` for several steps."""
    if "f" in kinds and same_float(a, b, out):  # the common case, without the promotion machinery
        dtype = out.dtype
        buffer = work_buffer(out, dtype, a, b) if opmath else out
        with quiet():
            fn(a, b if type(b) is np.ndarray else dtype.type(b), buffer, dtype)
        if buffer is not out:
            write(out, buffer)
        return
    dtype = compute_dtype(rule, a, b)
    check_kind(op, dtype, kinds)
    check_out(op, dtype, out)
    buffer = opmath_buffer(out, dtype, a, b) if opmath else work_buffer(out, dtype)
    with quiet():
        fn(operand(a, dtype), operand(b, dtype), buffer, buffer.dtype)
    store(out, buffer, dtype)
