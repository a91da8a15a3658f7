"""torch dtypes <-> `.pte` ScalarType codes, enum-valued arguments, and torch <-> NumPy arrays.

The torch side of the dtype table of `torchedge.schema.scalar_type`: every code with a NumPy
dtype maps to the torch dtype of the same name; `_TORCH_ONLY` lists those NumPy cannot
express. `to_numpy`/`to_torch` copy through `torchedge.kernels.torch_arrays`, the one bridge.
"""

from __future__ import annotations

import numpy as np
import torch

from torchedge.errors import ExportError
from torchedge.kernels import torch_arrays
from torchedge.schema.scalar_type import NUMPY_NAMES, STORAGE_ONLY, ScalarType, numpy_dtype

__all__ = [
    "scalar_type",
    "torch_dtype",
    "numpy_dtype_of",
    "to_numpy",
    "to_torch",
    "MEMORY_FORMAT_CODES",
    "LAYOUT_CODES",
]

# Codes whose torch dtype has no NumPy twin (or only a storage one).
_TORCH_ONLY = {
    ScalarType.COMPLEX32: torch.complex32,
    ScalarType.QINT8: torch.qint8,
    ScalarType.QUINT8: torch.quint8,
    ScalarType.QINT32: torch.qint32,
    ScalarType.QUINT4X2: torch.quint4x2,
    ScalarType.QUINT2X4: torch.quint2x4,
    ScalarType.FLOAT8E5M2: torch.float8_e5m2,
    ScalarType.FLOAT8E4M3FN: torch.float8_e4m3fn,
    ScalarType.FLOAT8E5M2FNUZ: torch.float8_e5m2fnuz,
    ScalarType.FLOAT8E4M3FNUZ: torch.float8_e4m3fnuz,
}
_TO_TORCH: dict[ScalarType, torch.dtype] = {
    **{code: getattr(torch, name) for code, name in NUMPY_NAMES.items() if code not in STORAGE_ONLY},
    **_TORCH_ONLY,
}
_TO_SCALAR_TYPE = {dtype: code for code, dtype in sorted(_TO_TORCH.items())}

MEMORY_FORMAT_CODES = {torch.contiguous_format: 0, torch.preserve_format: 1}
LAYOUT_CODES = {torch.strided: 0, torch.sparse_coo: 1}


def scalar_type(dtype: torch.dtype) -> ScalarType:
    try:
        return _TO_SCALAR_TYPE[dtype]
    except KeyError:
        raise ExportError(f"dtype {dtype} has no .pte ScalarType") from None


def torch_dtype(code: int) -> torch.dtype:
    return _TO_TORCH[ScalarType(code)]


def numpy_dtype_of(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch dtype (``ml_dtypes.bfloat16`` for bfloat16); `ExportError` or
    `KeyError` if it has none."""
    return numpy_dtype(scalar_type(dtype))


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous NumPy copy of ``tensor``; bfloat16 bit for bit as ``ml_dtypes.bfloat16``."""
    return torch_arrays.to_numpy(tensor.contiguous(), copy=True)


def to_torch(array: np.ndarray) -> torch.Tensor:
    """The torch tensor of ``array`` (a contiguous copy); ``ml_dtypes.bfloat16`` becomes torch.bfloat16."""
    return torch_arrays.to_torch(np.ascontiguousarray(array), copy=True)
