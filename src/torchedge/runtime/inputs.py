"""Convert what users pass to `Method.execute` into NumPy arrays, without importing torch."""

from __future__ import annotations

import numpy as np

from torchedge.errors import InputError
from torchedge.kernels.torch_arrays import to_numpy

__all__ = ["as_numpy"]


def _is_torch_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def as_numpy(value, expected_dtype: np.dtype, where: str) -> np.ndarray:
    """NumPy view of an ndarray or torch tensor; Python scalars/lists take the expected dtype."""
    if isinstance(value, np.ndarray):
        return value
    if _is_torch_tensor(value):
        return to_numpy(value)
    if isinstance(value, (bool, int, float, list, tuple)):
        try:
            return np.asarray(value, dtype=expected_dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise InputError(f"{where}: cannot convert {type(value).__name__} to {expected_dtype}: {e}") from None
    raise InputError(f"{where}: expected a NumPy array or tensor, got {type(value).__name__}")
