"""Build NumPy arrays for `.pte` tensors: planned views, constants, dim orders."""

from __future__ import annotations

import math

import numpy as np

from torchedge.errors import InvalidProgramError
from torchedge.schema.scalar_type import ScalarType, numpy_dtype

__all__ = ["dtype_of", "strides_for", "view_of"]


def dtype_of(code: int, where: str) -> np.dtype:
    try:
        return numpy_dtype(code)
    except (KeyError, ValueError):
        try:
            name = ScalarType(code).name
        except ValueError:
            name = f"code {code}"
        hint = " (install ml_dtypes for bfloat16)" if name == "BFLOAT16" else ""
        raise InvalidProgramError(f"{where}: scalar type {name} is not supported by the NumPy runtime{hint}") from None


def strides_for(sizes, dim_order, itemsize: int) -> tuple[int, ...]:
    """Byte strides of a dense tensor whose dims are laid out in ``dim_order`` (outermost first)."""
    strides = [0] * len(sizes)
    step = itemsize
    for dim in reversed(dim_order):
        strides[dim] = step
        step *= max(int(sizes[dim]), 1)
    return tuple(strides)


def view_of(buffer, offset: int, dtype: np.dtype, sizes, dim_order, where: str) -> np.ndarray:
    """An array over ``buffer[offset:]`` with the given shape and dim order; bounds-checked."""
    sizes = tuple(int(s) for s in sizes)
    if any(s < 0 for s in sizes):
        raise InvalidProgramError(f"{where}: negative size in {list(sizes)}")
    order = tuple(dim_order) if dim_order else tuple(range(len(sizes)))
    if sorted(order) != list(range(len(sizes))):
        raise InvalidProgramError(f"{where}: dim_order {list(order)} is not a permutation of {len(sizes)} dims")
    if math.prod(max(s, 1) for s in sizes) * dtype.itemsize >= 1 << 62:  # NumPy cannot even describe it
        raise InvalidProgramError(f"{where}: sizes {list(sizes)} describe more bytes than an array can address")
    nbytes = dtype.itemsize * math.prod(sizes)
    if offset < 0 or offset + nbytes > len(buffer):
        raise InvalidProgramError(
            f"{where}: tensor of {nbytes} bytes at offset {offset} does not fit in a buffer of {len(buffer)} bytes"
        )
    if nbytes == 0:
        return np.empty(sizes, dtype=dtype)
    return np.ndarray(
        sizes, dtype=dtype, buffer=buffer, offset=offset, strides=strides_for(sizes, order, dtype.itemsize)
    )
