"""Graph-level memory primitives that the out-variant pass inserts."""

from __future__ import annotations

import torch

__all__ = ["alloc", "view"]


def alloc(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised buffer for one out-variant output.

    In the final graph an ``alloc`` node stands for planned memory: the emitter
    turns it into a planned tensor value and emits no instruction for it.
    """
    return torch.empty(shape, dtype=dtype)


def view(base: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A reshape that shares ``base``'s planned memory.

    Memory planning gives a ``view`` node no bytes of its own: it extends the
    base's lifetime over the view's uses and the emitter gives the view the
    base's memory id and offset, so no instruction runs for it.
    """
    return base.view(shape)
