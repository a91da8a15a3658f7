"""Memory planning inside a delegate graph: the buffer of a value that no later node reads is
taken again by a later value of the same dtype and size, so a run touches fewer bytes (XNNPACK's
own runtime plans its values into one workspace the same way).

A buffer is free once every value on it (the one it was made for and the views of it, such as
reshapes) is dead: read by no node after the one being laid out. The graph's external values and
constants never come from here, and a value the caller reads (an external output, or a view of
an internal buffer that becomes one) keeps its buffer for good. Steps write their whole output
every run, so a buffer holds nothing between the nodes that use it.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

__all__ = ["BufferReuse", "value_ids"]


def value_ids(node) -> tuple[list[int], list[int]]:
    """The values a node reads and the ones it writes (its ``*_id`` fields, ``output*`` written)."""
    reads: list[int] = []
    writes: list[int] = []
    for name, value in vars(node).items():
        if name.endswith("_id") and isinstance(value, int):
            (writes if name.startswith("output") else reads).append(value)
    return reads, writes


class BufferReuse:
    """Hands out value buffers (`take`), follows which values live on each (`defined`) and frees
    a buffer once none of them is read by a later node (`after`). ``kept``: value ids whose
    buffers are never freed (the external outputs)."""

    def __init__(self, nodes: list, kept: set[int]):
        self._last_read: dict[int, int] = {}
        for index, node in enumerate(nodes):
            for value_id in [] if node is None else value_ids(node)[0]:
                self._last_read[value_id] = index
        self._kept = kept
        self._free: dict[tuple[str, int], list[np.ndarray]] = defaultdict(list)
        self._owners: dict[int, np.ndarray] = {}  # id of a buffer handed out -> the buffer
        self._users: dict[int, int] = {}  # id of a buffer -> how many live values are on it
        self._on: dict[int, int] = {}  # value id -> id of the buffer it is on

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A buffer of ``shape``: a free one of that size and dtype, else a new one."""
        size = math.prod(shape)
        free = self._free.get((np.dtype(dtype).str, size))
        owner = free.pop() if free else np.zeros(size, dtype)
        self._owners[id(owner)] = owner
        return owner.reshape(shape)

    def defined(self, value_id: int, buffer: np.ndarray) -> None:
        """Notes that ``value_id`` lives in ``buffer`` (one `take` gave, a view of one, or another array)."""
        owner = buffer if buffer.base is None else buffer.base
        key = id(owner)
        if key in self._owners:
            self._on[value_id] = key
            self._users[key] = self._users.get(key, 0) + 1

    def after(self, index: int, node) -> None:
        """Frees the buffers that no node after node ``index`` (``node``, just laid out) reads."""
        reads, writes = value_ids(node)
        for value_id in reads + writes:
            if self._last_read.get(value_id, -1) <= index and value_id not in self._kept:
                self._dead(value_id)

    def _dead(self, value_id: int) -> None:
        key = self._on.pop(value_id, None)
        if key is None:
            return
        self._users[key] -= 1
        if self._users[key] == 0:
            del self._users[key]
            owner = self._owners.pop(key)
            self._free[(owner.dtype.str, owner.size)].append(owner)
