"""Memory planning inside a delegate graph: the buffer of a value that no later node reads is
taken again by a later value of the same dtype and size, so a run touches fewer bytes (XNNPACK's
own runtime plans its values into one workspace the same way).

A buffer is free once every value on it (the one it was made for and the views of it, such as
reshapes) is dead: read by no node after the one being laid out. The graph's external values and
constants never come from here, and a value the caller reads (an external output, or a view of
an internal buffer that becomes one) keeps its buffer for good. Steps write their whole output
every run, so a buffer holds nothing between the nodes that use it.

Buffers come from ``workspace`` where given (one byte arena that the delegates of one method
share, see `XnnpackBackend.init_method`), each at its own aligned offset from the arena's start;
``nbytes`` counts what a plan takes, the size a workspace needs to hold it. Where a plan needs more
than the workspace holds, its further buffers are arrays of their own.
"""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from collections import defaultdict

import numpy as np

__all__ = ["ALIGNMENT", "BufferReuse", "value_ids"]

ALIGNMENT = 64  # bytes between the starts of a workspace's buffers: a cache line


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
    buffers are never freed (the external outputs); ``workspace``: uint8 bytes to take buffers from."""

    def __init__(self, nodes: list, kept: set[int], workspace: np.ndarray | None = None):
        self._last_read: dict[int, int] = {}
        for index, node in enumerate(nodes):
            for value_id in [] if node is None else value_ids(node)[0]:
                self._last_read[value_id] = index
        self._kept = kept
        self._workspace = workspace
        self.nbytes = 0  # aligned bytes of the buffers made so far
        self._free: dict[tuple[str, int], list[np.ndarray]] = defaultdict(list)
        self._starts: list[int] = []  # addresses of the buffers made, sorted
        self._made: dict[int, np.ndarray] = {}  # address -> buffer made there
        self._owners: dict[int, np.ndarray] = {}  # address of a buffer handed out -> the buffer
        self._users: dict[int, int] = {}  # address of a buffer -> how many live values are on it
        self._on: dict[int, int] = {}  # value id -> address of the buffer it is on

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A buffer of ``shape``: a free one of that size and dtype, else a new one."""
        size = math.prod(shape)
        free = self._free.get((np.dtype(dtype).str, size))
        owner = free.pop() if free else self._make(size, np.dtype(dtype))
        if owner.nbytes:
            self._owners[_address(owner)] = owner
        return owner.reshape(shape)

    def _make(self, size: int, dtype: np.dtype) -> np.ndarray:
        nbytes = size * dtype.itemsize
        if not nbytes:
            return np.zeros(size, dtype)
        start = self.nbytes
        self.nbytes += -(-nbytes // ALIGNMENT) * ALIGNMENT
        if self._workspace is not None and self.nbytes <= self._workspace.size:
            owner = self._workspace[start : start + nbytes].view(dtype)
        else:
            owner = np.zeros(size, dtype)
        address = _address(owner)
        insort(self._starts, address)
        self._made[address] = owner
        return owner

    def defined(self, value_id: int, buffer: np.ndarray) -> None:
        """Notes that ``value_id`` lives in ``buffer`` (one `take` gave, a view of one, or another array)."""
        key = self._owner_of(buffer)
        if key is not None and key in self._owners:
            self._on[value_id] = key
            self._users[key] = self._users.get(key, 0) + 1

    def _owner_of(self, buffer: np.ndarray) -> int | None:
        """The address of the buffer made here that ``buffer`` starts in, None if none."""
        if not buffer.nbytes:
            return None
        address = _address(buffer)
        k = bisect_right(self._starts, address) - 1
        if k < 0:
            return None
        start = self._starts[k]
        return start if address < start + self._made[start].nbytes else None

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


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]
