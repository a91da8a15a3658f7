"""Scratch memory of the optimized kernels: typed arrays that live for one kernel call.

A kernel entry point is decorated with `per_call`; inside the call, `scratch(shape, dtype)`
hands out uninitialised, cache-line aligned arrays that never overlap each other, carved one
after the other from this thread's arena. When the outermost call returns, all of them are
released at once and the arena grows to what the call needed, so the next calls reuse the
same pages (a fresh allocation faults on every page at first touch, which costs more than
the arithmetic of a small layer). Scratch arrays must not escape the call that took them.
Nested `per_call` scopes (a fused kernel calling a convolution, one chunk of a loop) release
what they took when they return.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable

import numpy as np

from torchedge.kernels.allocator import ALIGNMENT, aligned_bytes

__all__ = ["per_call", "scratch", "release_scratch", "arena_bytes"]


class _Arena:
    """One thread's scratch memory and what its open scopes took of it."""

    __slots__ = ("buffer", "capacity", "used", "spilled", "needed", "depth")

    def __init__(self) -> None:
        self.buffer = aligned_bytes(0)
        self.capacity = 0  # bytes of the buffer
        self.used = 0  # bytes of the buffer handed out in the open scopes
        self.spilled = 0  # bytes handed out beyond the buffer in the open scopes
        self.needed = 0  # the most bytes the scopes closed so far held at once
        self.depth = 0


_THREAD = threading.local()


def _arena() -> _Arena:
    try:
        return _THREAD.arena
    except AttributeError:
        _THREAD.arena = arena = _Arena()
        return arena


def scratch(shape, dtype) -> np.ndarray:
    """An uninitialised ``shape`` array of ``dtype`` that lives until the innermost `per_call`
    scope returns (outside any scope, a fresh array)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    arena = _arena()
    start = arena.used
    end = start + (-(-nbytes // ALIGNMENT) * ALIGNMENT or ALIGNMENT)
    if arena.depth and end <= arena.capacity:
        arena.used = end
        block = arena.buffer[start : start + nbytes]
    else:
        block = aligned_bytes(max(nbytes, 1))[:nbytes]
        if arena.depth:
            arena.spilled += end - start
    return block.view(dtype).reshape(shape)


def per_call(fn: Callable) -> Callable:
    """Decorate a kernel (or one step of its loop) whose `scratch` arrays live until it returns."""

    @functools.wraps(fn)
    def scoped(*args, **kwargs):
        arena = _arena()
        used, spilled = arena.used, arena.spilled
        arena.depth += 1
        try:
            return fn(*args, **kwargs)
        finally:
            arena.depth -= 1
            arena.needed = max(arena.needed, arena.used + arena.spilled)  # the scope's peak
            arena.used, arena.spilled = used, spilled
            if arena.depth == 0:
                if arena.needed > arena.capacity:
                    arena.buffer, arena.capacity = aligned_bytes(arena.needed), arena.needed
                arena.needed = 0

    return scoped


def release_scratch() -> None:
    """Free this thread's arena (the next calls allocate it again)."""
    arena = _arena()
    if arena.depth == 0:
        arena.buffer, arena.capacity = aligned_bytes(0), 0


def arena_bytes() -> int:
    """The size of this thread's arena."""
    return _arena().capacity
