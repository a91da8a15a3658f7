"""Mutable state that several methods of one program share (ExecuTorch's ``share_mutable_buffers``).

A program exported that way places every mutable buffer at one offset of a
memory id other than 1, the same in each method, so that ``prefill`` and
``decode`` read and write one KV cache. A memory id counts as shared state when
more than one method uses it and every tensor placed there is a mutable buffer
(it has an initial value or a name). Methods loaded while another method of the
same program is alive join its state; when none is alive, the next load starts
from the initial values again.

Threads: the program serializes the methods that use shared state with one lock, held by
their loads (`arenas_for`, the initial values) and their runs, so that two methods' updates of
one buffer never interleave; methods without shared state keep locks of their own.
"""

from __future__ import annotations

import weakref

import numpy as np

from torchedge.errors import MemoryPlanError
from torchedge.runtime.memory import DEFAULT_MAX_ARENA_BYTES, allocate_bytes
from torchedge.schema.program import Tensor

__all__ = ["SharedState"]


def _is_state(tensor: Tensor) -> bool:
    info = tensor.extra_tensor_info
    return tensor.data_buffer_idx > 0 or (info is not None and bool(info.fully_qualified_name))


def _state_memories(plan) -> dict[int, bool]:
    """Memory id (> 1) -> whether every tensor this plan places there is a mutable buffer."""
    found: dict[int, bool] = {}
    for value in plan.values or []:
        tensor = value.val
        if isinstance(tensor, Tensor) and tensor.allocation_info is not None:
            memory_id = tensor.allocation_info.memory_id
            if memory_id > 1:
                found[memory_id] = found.get(memory_id, True) and _is_state(tensor)
    return found


class SharedState:
    """The shared state memories of one program and the arenas currently holding them."""

    def __init__(self, plans) -> None:
        users: dict[int, int] = {}
        sizes: dict[int, int] = {}
        mixed: set[int] = set()
        for plan in plans:
            planned = list(plan.non_const_buffer_sizes or [0])
            for memory_id, only_state in _state_memories(plan).items():
                users[memory_id] = users.get(memory_id, 0) + 1
                if not only_state or memory_id >= len(planned):
                    mixed.add(memory_id)
                else:
                    sizes[memory_id] = max(sizes.get(memory_id, 0), int(planned[memory_id]))
        self.sizes = {m: size for m, size in sizes.items() if m not in mixed and users[m] > 1}
        self._arenas: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()

    def used_by(self, plan) -> bool:
        """Whether ``plan`` uses any of the shared state memories."""
        return any(memory_id in self.sizes for memory_id in _state_memories(plan))

    def arenas_for(self, plan, max_bytes: int | None = None) -> tuple[dict[int, np.ndarray], frozenset[int]]:
        """The shared arenas ``plan`` uses, and the ids among them another loaded method holds.
        Their sizes together must stay within ``max_bytes`` (the method's ``max_arena_bytes``)
        before any is allocated."""
        limit = DEFAULT_MAX_ARENA_BYTES if max_bytes is None else max_bytes
        used = [m for m in _state_memories(plan) if m in self.sizes]
        total = sum(self.sizes[m] for m in used)
        if total > limit:
            raise MemoryPlanError(
                f"method '{plan.name}': its shared state (memory ids {used}) needs {total} bytes, more than the "
                f"limit of {limit}; raise max_arena_bytes if intended"
            )
        shared, live = {}, set()
        for memory_id in used:
            arena = self._arenas.get(memory_id)
            if arena is None:
                arena = allocate_bytes(self.sizes[memory_id], f"shared state memory id {memory_id}", True)
                self._arenas[memory_id] = arena
            else:
                live.add(memory_id)
            shared[memory_id] = arena
        return shared, frozenset(live)
