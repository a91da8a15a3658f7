"""The memory manager: one NumPy byte arena per planned memory id.

Arena sizes come from the program (``non_const_buffer_sizes``); every planned
tensor is a view into its arena, so nothing on the execution path allocates
what the plan already placed.
"""

from __future__ import annotations

import numpy as np

from torchedge.errors import InvalidProgramError, MemoryPlanError

__all__ = ["MemoryManager"]

# Refuse plans larger than this unless the caller raises the limit: a corrupt
# size field must not trigger a huge allocation.
DEFAULT_MAX_ARENA_BYTES = 16 << 30


class MemoryManager:
    def __init__(self, planned_sizes: list[int], max_arena_bytes: int = DEFAULT_MAX_ARENA_BYTES):
        for memory_id, size in enumerate(planned_sizes, start=1):
            if size < 0:
                raise InvalidProgramError(f"planned buffer {memory_id} has negative size {size}")
            if size > max_arena_bytes:
                raise MemoryPlanError(f"planned buffer {memory_id} needs {size} bytes, more than the "
                                      f"limit of {max_arena_bytes}; raise max_arena_bytes if intended")
        self.arenas = [np.zeros(size, dtype=np.uint8) for size in planned_sizes]

    def arena(self, memory_id: int) -> np.ndarray:
        """The arena of a 1-based memory id (id 0 is the historical constants slot)."""
        if not 1 <= memory_id <= len(self.arenas):
            raise InvalidProgramError(f"memory id {memory_id} is out of range: the program plans "
                                      f"{len(self.arenas)} buffer(s)")
        return self.arenas[memory_id - 1]

    @property
    def planned_bytes(self) -> int:
        return sum(a.nbytes for a in self.arenas)
