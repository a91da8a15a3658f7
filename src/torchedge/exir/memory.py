"""Graph-level memory primitives that the out-variant pass inserts."""

from __future__ import annotations

import torch

__all__ = ["alloc"]


def alloc(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised buffer for one out-variant output.

    In the final graph an ``alloc`` node stands for planned memory: the emitter
    turns it into a planned tensor value and emits no instruction for it.
    """
    return torch.empty(shape, dtype=dtype)
