"""Runtime allocation for outputs whose size depends on the data, and aligned memory.

Kernels of data-dependent operators (``nonzero``, ``masked_select``...) call
`allocate_output`; while a method executes, the runtime routes it to that
method's memory manager, which accounts and bounds what is allocated.

The planned arenas and the kernels' scratch memory start on a cache line (`aligned_bytes`):
NumPy's vector loops run measurably slower over arrays 16 bytes off a 32-byte boundary
(AVX2), and the C allocator gives large blocks 16 bytes into a page.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

import numpy as np

__all__ = ["ALIGNMENT", "aligned_bytes", "allocate_output", "use_allocator", "reset_allocator"]

ALIGNMENT = 64  # bytes: a cache line, two AVX2 vectors, one AVX-512 vector

_ALLOCATOR: contextvars.ContextVar[Callable | None] = contextvars.ContextVar("torchedge_allocator", default=None)


def allocate_output(shape, dtype) -> np.ndarray:
    """An uninitialised array for a kernel's data-dependent output."""
    allocator = _ALLOCATOR.get()
    if allocator is None:
        return np.empty(tuple(shape), dtype=dtype)
    return allocator(tuple(int(s) for s in shape), np.dtype(dtype))


def use_allocator(allocator: Callable | None):
    """Make ``allocator(shape, dtype)`` serve `allocate_output`; returns a token for `reset`."""
    return _ALLOCATOR.set(allocator)


def reset_allocator(token) -> None:
    _ALLOCATOR.reset(token)


def aligned_bytes(nbytes: int, zeroed: bool = False) -> np.ndarray:
    """A 1-D uint8 array of ``nbytes`` starting on an `ALIGNMENT` boundary (zeros if ``zeroed``)."""
    block = (np.zeros if zeroed else np.empty)(nbytes + ALIGNMENT, np.uint8)
    start = -block.ctypes.data % ALIGNMENT
    return block[start : start + nbytes]
