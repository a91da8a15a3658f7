"""torch dtypes <-> `.pte` ScalarType codes, and enum-valued arguments."""

from __future__ import annotations

import torch

from torchedge.errors import ExportError
from torchedge.schema.scalar_type import ScalarType

__all__ = ["scalar_type", "torch_dtype", "MEMORY_FORMAT_CODES", "LAYOUT_CODES"]

_TO_SCALAR_TYPE = {
    torch.uint8: ScalarType.BYTE,
    torch.int8: ScalarType.CHAR,
    torch.int16: ScalarType.SHORT,
    torch.int32: ScalarType.INT,
    torch.int64: ScalarType.LONG,
    torch.float16: ScalarType.HALF,
    torch.float32: ScalarType.FLOAT,
    torch.float64: ScalarType.DOUBLE,
    torch.complex32: ScalarType.COMPLEX32,
    torch.complex64: ScalarType.COMPLEX64,
    torch.complex128: ScalarType.COMPLEX128,
    torch.bool: ScalarType.BOOL,
    torch.qint8: ScalarType.QINT8,
    torch.quint8: ScalarType.QUINT8,
    torch.qint32: ScalarType.QINT32,
    torch.bfloat16: ScalarType.BFLOAT16,
    torch.quint4x2: ScalarType.QUINT4X2,
    torch.quint2x4: ScalarType.QUINT2X4,
    torch.float8_e5m2: ScalarType.FLOAT8E5M2,
    torch.float8_e4m3fn: ScalarType.FLOAT8E4M3FN,
    torch.float8_e5m2fnuz: ScalarType.FLOAT8E5M2FNUZ,
    torch.float8_e4m3fnuz: ScalarType.FLOAT8E4M3FNUZ,
    torch.uint16: ScalarType.UINT16,
    torch.uint32: ScalarType.UINT32,
    torch.uint64: ScalarType.UINT64,
}
_TO_TORCH = {code: dtype for dtype, code in _TO_SCALAR_TYPE.items()}

MEMORY_FORMAT_CODES = {torch.contiguous_format: 0, torch.preserve_format: 1}
LAYOUT_CODES = {torch.strided: 0, torch.sparse_coo: 1}


def scalar_type(dtype: torch.dtype) -> ScalarType:
    try:
        return _TO_SCALAR_TYPE[dtype]
    except KeyError:
        raise ExportError(f"dtype {dtype} has no .pte ScalarType") from None


def torch_dtype(code: int) -> torch.dtype:
    return _TO_TORCH[ScalarType(code)]
