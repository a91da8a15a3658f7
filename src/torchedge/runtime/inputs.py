"""Convert what users pass to `Method.execute` into NumPy arrays, without importing torch."""

from __future__ import annotations

import numpy as np

from torchedge.errors import InputError
from torchedge.kernels.torch_arrays import to_numpy

__all__ = ["as_numpy", "input_list"]


def _is_torch_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def as_numpy(value, expected_dtype: np.dtype, where: str) -> np.ndarray:
    """NumPy view of an ndarray, torch tensor, DLPack object (``__dlpack__``: JAX, CuPy on the
    host, ...) or buffer-protocol object (``memoryview``, ``array.array``, ...); Python
    scalars/lists take the expected dtype."""
    if isinstance(value, np.ndarray):
        return value
    if _is_torch_tensor(value):
        return to_numpy(value)
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (BufferError, TypeError, ValueError, RuntimeError) as e:
            raise InputError(f"{where}: cannot read the {type(value).__name__} through DLPack: {e}") from None
    if isinstance(value, (memoryview, bytearray)) or _has_buffer(value):
        try:
            return np.asarray(memoryview(value))
        except (TypeError, ValueError, NotImplementedError) as e:
            raise InputError(f"{where}: cannot read the {type(value).__name__}'s buffer: {e}") from None
    if isinstance(value, (bool, int, float, list, tuple)):
        try:
            return np.asarray(value, dtype=expected_dtype)
        except (ValueError, TypeError, OverflowError) as e:
            raise InputError(f"{where}: cannot convert {type(value).__name__} to {expected_dtype}: {e}") from None
    raise InputError(f"{where}: expected a NumPy array or tensor, got {type(value).__name__}")


def input_list(method: str, inputs) -> list:
    """``execute``'s inputs as a list; one array (or tensor) passed alone is an `InputError`
    saying so, not a count or shape mismatch found by iterating over its rows."""
    if isinstance(inputs, (list, tuple)):
        return list(inputs)
    if isinstance(inputs, (np.ndarray, np.generic, int, float, bool)) or hasattr(inputs, "__dlpack__"):
        raise InputError(
            f"method '{method}': execute takes a list of inputs, got one {type(inputs).__name__}: pass [value]"
        )
    return list(inputs)


def _has_buffer(value) -> bool:
    """Whether ``value`` exports the buffer protocol (bytes excepted: not an array)."""
    if isinstance(value, (bytes, str)):
        return False
    try:
        memoryview(value)
    except TypeError:
        return False
    return True
