"""`ScalarType` codes of `scalar_type.fbs` and their NumPy dtypes."""

from __future__ import annotations

from enum import IntEnum

import numpy as np

__all__ = ["ScalarType", "numpy_dtype", "scalar_type_of", "element_size"]


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


def _bfloat16():
    try:
        import ml_dtypes
    except ImportError:  # bfloat16 programs then fail with a clear message at load
        return None
    return np.dtype(ml_dtypes.bfloat16)


_NUMPY: dict[ScalarType, np.dtype] = {
    ScalarType.BYTE: np.dtype(np.uint8),
    ScalarType.CHAR: np.dtype(np.int8),
    ScalarType.SHORT: np.dtype(np.int16),
    ScalarType.INT: np.dtype(np.int32),
    ScalarType.LONG: np.dtype(np.int64),
    ScalarType.HALF: np.dtype(np.float16),
    ScalarType.FLOAT: np.dtype(np.float32),
    ScalarType.DOUBLE: np.dtype(np.float64),
    ScalarType.COMPLEX64: np.dtype(np.complex64),
    ScalarType.COMPLEX128: np.dtype(np.complex128),
    ScalarType.BOOL: np.dtype(np.bool_),
    ScalarType.QINT8: np.dtype(np.int8),
    ScalarType.QUINT8: np.dtype(np.uint8),
    ScalarType.QINT32: np.dtype(np.int32),
    ScalarType.BITS16: np.dtype(np.uint16),
    ScalarType.UINT16: np.dtype(np.uint16),
    ScalarType.UINT32: np.dtype(np.uint32),
    ScalarType.UINT64: np.dtype(np.uint64),
}
_BF16 = _bfloat16()
if _BF16 is not None:
    _NUMPY[ScalarType.BFLOAT16] = _BF16

_FROM_NUMPY = {
    np.dtype(np.uint8): ScalarType.BYTE,
    np.dtype(np.int8): ScalarType.CHAR,
    np.dtype(np.int16): ScalarType.SHORT,
    np.dtype(np.int32): ScalarType.INT,
    np.dtype(np.int64): ScalarType.LONG,
    np.dtype(np.float16): ScalarType.HALF,
    np.dtype(np.float32): ScalarType.FLOAT,
    np.dtype(np.float64): ScalarType.DOUBLE,
    np.dtype(np.complex64): ScalarType.COMPLEX64,
    np.dtype(np.complex128): ScalarType.COMPLEX128,
    np.dtype(np.bool_): ScalarType.BOOL,
    np.dtype(np.uint16): ScalarType.UINT16,
    np.dtype(np.uint32): ScalarType.UINT32,
    np.dtype(np.uint64): ScalarType.UINT64,
}
if _BF16 is not None:
    _FROM_NUMPY[_BF16] = ScalarType.BFLOAT16


def numpy_dtype(code: int) -> np.dtype:
    """NumPy dtype of a ScalarType code; `KeyError`/`ValueError` if it has none."""
    return _NUMPY[ScalarType(code)]


def scalar_type_of(dtype) -> ScalarType:
    """ScalarType of a NumPy dtype."""
    return _FROM_NUMPY[np.dtype(dtype)]


def element_size(code: int) -> int:
    return numpy_dtype(code).itemsize
