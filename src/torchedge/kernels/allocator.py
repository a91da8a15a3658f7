"""Runtime allocation for outputs whose size depends on the data.

Kernels of data-dependent operators (``nonzero``, ``masked_select``...) call
`allocate_output`; while a method executes, the runtime routes it to that
method's memory manager, which accounts and bounds what is allocated.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

import numpy as np

__all__ = ["allocate_output", "use_allocator", "reset_allocator"]

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
