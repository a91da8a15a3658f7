"""Convert what users pass to `Method.execute` into NumPy arrays, without importing torch."""

from __future__ import annotations

import sys

import numpy as np

from torchedge.errors import InputError

__all__ = ["as_numpy"]


def _is_torch_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def as_numpy(value, expected_dtype: np.dtype, where: str) -> np.ndarray:
    """NumPy view of an ndarray or torch tensor; Python scalars/lists take the expected dtype."""
    if isinstance(value, np.ndarray):
        return value
    if _is_torch_tensor(value):
        tensor = value.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":  # NumPy has no bfloat16: reinterpret the bits
            torch = sys.modules["torch"]  # already imported: the caller made a torch tensor
            return tensor.view(torch.int16).numpy().view(expected_dtype)
        return tensor.numpy()
    if isinstance(value, (bool, int, float, list, tuple)):
        try:
            return np.asarray(value, dtype=expected_dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise InputError(f"{where}: cannot convert {type(value).__name__} to {expected_dtype}: {e}") from None
    raise InputError(f"{where}: expected a NumPy array or tensor, got {type(value).__name__}")
