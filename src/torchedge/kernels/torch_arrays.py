"""The one bridge between torch tensors and NumPy arrays, bfloat16 included, importing no torch.

NumPy has no bfloat16 of its own: torchedge uses ``ml_dtypes.bfloat16``, and its bits cross
through an int16 view. Both functions take torch from ``sys.modules``: whoever holds a tensor,
or asks for one, has imported it (the compiler, devtools, ATen mode, a user's inputs).
"""

from __future__ import annotations

import sys

import numpy as np

from torchedge.errors import InternalError
from torchedge.schema.scalar_type import ScalarType, numpy_dtype

__all__ = ["to_numpy", "to_torch"]


def _torch():
    torch = sys.modules.get("torch")
    if torch is None:
        raise InternalError("torch must be imported before converting between tensors and arrays")
    return torch


def to_numpy(tensor, copy: bool = False) -> np.ndarray:
    """The NumPy array of a CPU-convertible tensor: a view of its memory when it can be, unless ``copy``."""
    torch = _torch()
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        array = tensor.view(torch.int16).numpy().view(numpy_dtype(ScalarType.BFLOAT16))
    else:
        array = tensor.numpy()
    return array.copy() if copy else array


def to_torch(array: np.ndarray, copy: bool = False):
    """The tensor of ``array``: sharing its memory unless ``copy`` (or the array is read-only,
    which torch does not accept without a copy)."""
    torch = _torch()
    if copy or not array.flags.writeable:
        array = array.copy()
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)
