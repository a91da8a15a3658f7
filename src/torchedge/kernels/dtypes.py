"""PyTorch's dtype rules for the NumPy kernels: categories, promotion, ``result_type``.

Conversions follow PyTorch too, but where C leaves them undefined: `convert` gives a float
converted to an integer one answer on every machine (truncated toward zero, wrapped modulo
2**bits; NaN and infinities 0), where eager's and NumPy's casts differ by CPU and version.

NumPy and PyTorch disagree on promotion (``int16 + float16`` is ``float32`` in NumPy and
``float16`` in PyTorch; a Python float keeps a float16 tensor float16 in both, but turns an
int tensor into float64 in NumPy and into float32 in PyTorch). Kernels therefore never let
NumPy choose: they ask `result_type` for the dtype ATen computes in and pass it explicitly.

    >>> import numpy as np
    >>> result_type(np.ones(3, np.int32), 2.5)
    dtype('float32')
    >>> result_type(np.ones(3, np.int32), np.array(7, np.int64))
    dtype('int32')
"""

from __future__ import annotations

import numpy as np

from torchedge.errors import KernelError
from torchedge.schema.scalar_type import numpy_dtype

__all__ = [
    "BOOL",
    "INT64",
    "DEFAULT_FLOAT",
    "category",
    "is_floating",
    "is_integral",
    "promote_types",
    "result_type",
    "float_result_type",
    "accumulate_dtype",
    "can_cast",
    "dtype_from_code",
    "convert",
    "conversion_undefined",
]

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
DEFAULT_FLOAT = np.dtype(np.float32)  # torch.get_default_dtype()

# Type categories, ordered: a higher category wins over any dtype of a lower one.
_BOOL, _INTEGRAL, _FLOATING, _COMPLEX = 0, 1, 2, 3
_KIND_CATEGORY = {"b": _BOOL, "i": _INTEGRAL, "u": _INTEGRAL, "f": _FLOATING, "c": _COMPLEX}
_UNSIGNED_WIDE = {np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)}


def category(dtype) -> int:
    """0 for bool, 1 for integers, 2 for floating point, 3 for complex."""
    dtype = np.dtype(dtype)
    try:
        return _KIND_CATEGORY[dtype.kind]
    except KeyError:
        if dtype.name == "bfloat16":  # ml_dtypes' bfloat16 has kind 'V'
            return _FLOATING
        raise KernelError(f"dtype {dtype} has no PyTorch equivalent") from None


def is_floating(dtype) -> bool:
    return category(dtype) == _FLOATING


def is_integral(dtype, include_bool: bool = False) -> bool:
    c = category(dtype)
    return c == _INTEGRAL or (include_bool and c == _BOOL)


def promote_types(a, b) -> np.dtype:
    """``torch.promote_types`` for NumPy dtypes."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        if max(ca, cb) == _COMPLEX:
            return np.promote_types(a, b)
        return a if ca > cb else b
    if ca == _INTEGRAL and (a in _UNSIGNED_WIDE or b in _UNSIGNED_WIDE):
        raise KernelError(f"promotion of {a} with {b} is not supported (as in PyTorch)")
    if ca == _FLOATING and "bfloat16" in (a.name, b.name):
        other = b if a.name == "bfloat16" else a
        return np.dtype(np.float32) if other.itemsize <= 2 else other
    return np.promote_types(a, b)


def _combine(higher, lower):
    """Fold the result of a lower-priority operand class into a higher one (c10 rules)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch, cl = category(higher), category(lower)
    if ch == _COMPLEX:
        return higher
    if cl == _COMPLEX:
        return np.promote_types(higher, lower) if ch == _FLOATING else lower
    if ch == _FLOATING:
        return higher
    if ch == _BOOL or cl == _FLOATING:
        return promote_types(higher, lower)
    return higher


def _scalar_dtype(value) -> np.dtype:
    # A Python number is a "wrapped number": bool, int64, or the default float dtype.
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT64
    if isinstance(value, float):
        return DEFAULT_FLOAT
    if isinstance(value, complex):
        return np.dtype(np.complex64)
    raise KernelError(f"expected a tensor or a number, got {type(value).__name__}")


def result_type(*operands) -> np.dtype:
    """``torch.result_type`` over arrays and Python numbers; ``None`` operands are skipped.

    Dimensioned tensors outrank zero-dim tensors, which outrank Python numbers; a lower
    class only matters when its category (bool < integer < floating) is higher.
    """
    dim = zero = wrapped = None
    for op in operands:
        if op is None:
            continue
        if isinstance(op, (np.ndarray, np.generic)):
            if op.ndim > 0:
                dim = op.dtype if dim is None else promote_types(dim, op.dtype)
            else:
                zero = op.dtype if zero is None else promote_types(zero, op.dtype)
        else:
            t = _scalar_dtype(op)
            wrapped = t if wrapped is None else promote_types(wrapped, t)
    result = _combine(dim, _combine(zero, wrapped))
    if result is None:
        raise KernelError("result_type needs at least one operand")
    return np.dtype(result)


def float_result_type(*operands) -> np.dtype:
    """`result_type`, with bool and integer results turned into the default float dtype."""
    dtype = result_type(*operands)
    return dtype if category(dtype) >= _FLOATING else DEFAULT_FLOAT


def accumulate_dtype(dtype) -> np.dtype:
    """The dtype ATen's CPU kernels accumulate in: float32 for the 16-bit floats."""
    dtype = np.dtype(dtype)
    if category(dtype) == _FLOATING and dtype.itemsize < 4:
        return np.dtype(np.float32)
    return dtype


def can_cast(src, dst) -> bool:
    """``torch.can_cast``: no float to integer, no complex to real, nothing else to bool."""
    cs, cd = category(src), category(dst)
    if cs > cd and cd >= _INTEGRAL:
        return False
    return not (cd == _BOOL and cs != _BOOL)


def dtype_from_code(code, default=None) -> np.dtype:
    """NumPy dtype of a ScalarType code argument; ``default`` when the argument is None."""
    if code is None:
        return default
    return numpy_dtype(code)


_TWO_64 = 2.0**64


def conversion_undefined(values, dtype) -> np.ndarray:
    """Where C leaves converting ``values`` (floating point or complex: their real part) to the
    integer ``dtype`` undefined: NaN, infinities and values whose truncation is out of its range."""
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):
        truncated = np.trunc(np.real(np.asarray(values)).astype(np.float64))
        return ~((truncated >= info.min) & (truncated <= info.max))  # NaN compares false


def _wrapped(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float64 ``values`` truncated toward zero, NaN and infinities as 0, wrapped into ``dtype``
    modulo 2**bits, computed only with operations C defines on every value they see."""
    truncated = np.trunc(np.where(np.isfinite(values), values, 0.0))
    low = np.fmod(truncated, _TWO_64)  # exact: in (-2**64, 2**64)
    low = np.where(low >= 2.0**63, low - _TWO_64, np.where(low < -(2.0**63), low + _TWO_64, low))  # exact
    bits = low.astype(np.int64).view(np.uint64)  # in int64's range: defined
    return bits.astype(np.dtype(f"u{dtype.itemsize}")).view(dtype)  # unsigned narrowing keeps the low bits


def convert(values, dtype) -> np.ndarray:
    """``values`` (an array or a number) as an array of ``dtype``, cast as PyTorch casts.

    Floating point (complex: the real part) to an integer dtype truncates toward zero and
    wraps modulo 2**bits, as a conversion through int64 does (-1.0 -> 255 in uint8, 300.0 ->
    44, 255.9 -> 255); values beyond int64 wrap the same way, exactly, and NaN and infinities
    give 0. C leaves these conversions undefined out of range, and eager's and NumPy's answers
    differ by CPU and version: every kernel converts floats to integers here. Other
    conversions are NumPy's ``astype`` (``values`` itself when it already has ``dtype``).
    """
    array, dtype = np.asarray(values), np.dtype(dtype)
    if array.dtype == dtype:
        return array
    if category(dtype) != _INTEGRAL or category(array.dtype) < _FLOATING:
        return array.astype(dtype)
    wide = np.real(array).astype(np.float64)  # exact from every float dtype
    if not conversion_undefined(wide, dtype).any():
        return np.trunc(wide).astype(dtype)  # integers in range: C defines the cast
    return _wrapped(wide, dtype)
