"""`ScalarType` codes of `scalar_type.fbs`: the one dtype table (names, NumPy dtypes).

Every other dtype mapping of torchedge (torch dtypes, the edge DSL's names, ONNX's NumPy
column, short names) is derived from `_TABLE`."""

from __future__ import annotations

from enum import IntEnum

import numpy as np

__all__ = [
    "ScalarType",
    "NAMES",
    "NUMPY_NAMES",
    "SHORT_NAMES",
    "STORAGE_ONLY",
    "numpy_dtype",
    "scalar_type_of",
    "element_size",
]


class ScalarType(IntEnum):
    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    COMPLEX32 = 8
    COMPLEX64 = 9
    COMPLEX128 = 10
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    QUINT4X2 = 16
    QUINT2X4 = 17
    BITS16 = 22
    FLOAT8E5M2 = 23
    FLOAT8E4M3FN = 24
    FLOAT8E5M2FNUZ = 25
    FLOAT8E4M3FNUZ = 26
    UINT16 = 27
    UINT32 = 28
    UINT64 = 29


# The one dtype table: code -> (c10 name, NumPy dtype name or None, short name or None).
# The NumPy name is also torch's attribute name for the dtype (``torch.float32``); bfloat16
# comes from ml_dtypes. The short names are OpInfo's (``f32``, ``bf16``).
_TABLE: dict[ScalarType, tuple[str, str | None, str | None]] = {
    ScalarType.BYTE: ("Byte", "uint8", "u8"),
    ScalarType.CHAR: ("Char", "int8", "i8"),
    ScalarType.SHORT: ("Short", "int16", "i16"),
    ScalarType.INT: ("Int", "int32", "i32"),
    ScalarType.LONG: ("Long", "int64", "i64"),
    ScalarType.HALF: ("Half", "float16", "f16"),
    ScalarType.FLOAT: ("Float", "float32", "f32"),
    ScalarType.DOUBLE: ("Double", "float64", "f64"),
    ScalarType.COMPLEX32: ("ComplexHalf", None, None),
    ScalarType.COMPLEX64: ("ComplexFloat", "complex64", None),
    ScalarType.COMPLEX128: ("ComplexDouble", "complex128", None),
    ScalarType.BOOL: ("Bool", "bool", "b8"),
    ScalarType.QINT8: ("QInt8", "int8", None),
    ScalarType.QUINT8: ("QUInt8", "uint8", None),
    ScalarType.QINT32: ("QInt32", "int32", None),
    ScalarType.BFLOAT16: ("BFloat16", "bfloat16", "bf16"),
    ScalarType.QUINT4X2: ("QUInt4x2", None, None),
    ScalarType.QUINT2X4: ("QUInt2x4", None, None),
    ScalarType.BITS16: ("Bits16", "uint16", None),
    ScalarType.FLOAT8E5M2: ("Float8_e5m2", None, None),
    ScalarType.FLOAT8E4M3FN: ("Float8_e4m3fn", None, None),
    ScalarType.FLOAT8E5M2FNUZ: ("Float8_e5m2fnuz", None, None),
    ScalarType.FLOAT8E4M3FNUZ: ("Float8_e4m3fnuz", None, None),
    ScalarType.UINT16: ("UInt16", "uint16", None),
    ScalarType.UINT32: ("UInt32", "uint32", None),
    ScalarType.UINT64: ("UInt64", "uint64", None),
}
# Codes whose NumPy dtype is only their storage: a NumPy array of it is the other code's.
STORAGE_ONLY = frozenset({ScalarType.QINT8, ScalarType.QUINT8, ScalarType.QINT32, ScalarType.BITS16})

NAMES: dict[ScalarType, str] = {code: row[0] for code, row in _TABLE.items()}
NUMPY_NAMES: dict[ScalarType, str] = {code: row[1] for code, row in _TABLE.items() if row[1] is not None}
SHORT_NAMES: dict[ScalarType, str] = {code: row[2] for code, row in _TABLE.items() if row[2] is not None}


def _bfloat16() -> np.dtype | None:
    """ml_dtypes' bfloat16, imported on first use (importing ml_dtypes is slow);
    None without ml_dtypes (bfloat16 programs then fail with a clear message at load)."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


_NUMPY: dict[ScalarType, np.dtype] = {
    code: np.dtype(name) for code, name in NUMPY_NAMES.items() if code != ScalarType.BFLOAT16
}
_FROM_NUMPY = {dtype: code for code, dtype in _NUMPY.items() if code not in STORAGE_ONLY}


def numpy_dtype(code: int) -> np.dtype:
    """NumPy dtype of a ScalarType code; `KeyError`/`ValueError` if it has none."""
    code = ScalarType(code)
    if code == ScalarType.BFLOAT16 and code not in _NUMPY and (bfloat16 := _bfloat16()) is not None:
        _NUMPY[code] = bfloat16
    return _NUMPY[code]


def scalar_type_of(dtype) -> ScalarType:
    """ScalarType of a NumPy dtype."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":  # an ml_dtypes dtype exists only once ml_dtypes is imported
        return ScalarType.BFLOAT16
    return _FROM_NUMPY[dtype]


def element_size(code: int) -> int:
    return numpy_dtype(code).itemsize
