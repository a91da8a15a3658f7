"""The memory manager: one NumPy byte arena per planned memory id, plus a bounded
runtime allocator for outputs whose size depends on the data.

Arena sizes come from the program (``non_const_buffer_sizes``); every planned
tensor is a view into its arena, so nothing on the execution path allocates
what the plan already placed.
"""

from __future__ import annotations

import math
import os

import numpy as np

from torchedge.errors import InvalidProgramError, MemoryPlanError
from torchedge.kernels.allocator import aligned_bytes

__all__ = ["MemoryManager"]


MAX_BYTES_VARIABLE = "TORCHEDGE_MAX_ARENA_BYTES"


def _address_space_limit() -> int | None:
    """The process's address-space limit (``ulimit -v``), None when unlimited or unknown."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def _default_max_bytes() -> int:
    """``TORCHEDGE_MAX_ARENA_BYTES`` when set; else half the machine's physical memory and half the
    process's address-space limit, at most 4 GiB (4 GiB when neither can be read)."""
    configured = os.environ.get(MAX_BYTES_VARIABLE)
    if configured is not None:
        try:
            return max(int(configured), 0)
        except ValueError:
            raise MemoryPlanError(f"{MAX_BYTES_VARIABLE} must be a number of bytes, got {configured!r}") from None
    limits = [4 << 30]
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        physical = 0
    if physical > 0:
        limits.append(max(physical // 2, 256 << 20))
    address_space = _address_space_limit()
    if address_space is not None:
        limits.append(address_space // 2)
    return min(limits)


# Refuse plans larger than this unless the caller raises the limit (``max_arena_bytes``): a
# corrupt size field must not trigger a huge allocation. It bounds the planned arenas of a
# method together, every tensor the file sizes, and the run's allocations.
DEFAULT_MAX_ARENA_BYTES = _default_max_bytes()


def allocate_bytes(nbytes: int, what: str, zeroed: bool = False) -> np.ndarray:
    """`aligned_bytes`, with a `MemoryPlanError` naming ``what`` and the size when the process
    cannot get that much memory."""
    try:
        return aligned_bytes(nbytes, zeroed)
    except MemoryError:
        raise MemoryPlanError(
            f"{what}: cannot allocate {nbytes} bytes ({nbytes / (1 << 20):.1f} MiB): the process is out of "
            f"memory; lower the limit (max_arena_bytes, or {MAX_BYTES_VARIABLE}) to refuse such programs "
            "before allocating"
        ) from None


class MemoryManager:
    """``shared``: arenas of memory ids this method uses together with other methods of its
    program (mutable state shared between them); ``live`` the ids among them whose state
    another method already holds, so loading must not reset it."""

    def __init__(
        self,
        planned_sizes: list[int],
        max_arena_bytes: int = DEFAULT_MAX_ARENA_BYTES,
        shared: dict[int, np.ndarray] | None = None,
        live: frozenset[int] = frozenset(),
    ):
        if max_arena_bytes is None or max_arena_bytes < 0:
            raise ValueError(f"max_arena_bytes must be a number of bytes >= 0, got {max_arena_bytes}")
        for memory_id, size in enumerate(planned_sizes, start=1):
            if size < 0:
                raise InvalidProgramError(f"planned buffer {memory_id} has negative size {size}")
            if size > max_arena_bytes:
                raise MemoryPlanError(
                    f"planned buffer {memory_id} needs {size} bytes, more than the "
                    f"limit of {max_arena_bytes}; raise max_arena_bytes if intended"
                )
        shared = shared or {}
        total = sum(size for memory_id, size in enumerate(planned_sizes, start=1) if memory_id not in shared)
        if total > max_arena_bytes:
            raise MemoryPlanError(
                f"the planned buffers need {total} bytes together, more than the limit of "
                f"{max_arena_bytes}; raise max_arena_bytes if intended"
            )
        self.live = live
        self.arenas = [
            shared[memory_id] if memory_id in shared else allocate_bytes(size, f"planned memory id {memory_id}", True)
            for memory_id, size in enumerate(planned_sizes, start=1)
        ]
        self.max_runtime_bytes = max_arena_bytes
        self.runtime_bytes = 0

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Runtime allocation for a data-dependent output, bounded by ``max_runtime_bytes``."""
        nbytes = math.prod(int(s) for s in shape) * dtype.itemsize
        if self.runtime_bytes + nbytes > self.max_runtime_bytes:
            raise MemoryPlanError(
                f"runtime allocation of {nbytes} bytes for shape {list(shape)} would exceed "
                f"the limit of {self.max_runtime_bytes} bytes"
            )
        buffer = allocate_bytes(nbytes, f"runtime allocation of shape {list(shape)} ({dtype})")
        self.runtime_bytes += nbytes
        return buffer.view(dtype).reshape(shape)  # aligned, as NumPy's own allocations are not always

    def reset_runtime(self) -> None:
        """Forget the previous execution's runtime allocations (their arrays stay with their owners)."""
        self.runtime_bytes = 0

    def arena(self, memory_id: int) -> np.ndarray:
        """The arena of a 1-based memory id (id 0 is the historical constants slot)."""
        if not 1 <= memory_id <= len(self.arenas):
            raise InvalidProgramError(
                f"memory id {memory_id} is out of range: the program plans {len(self.arenas)} buffer(s)"
            )
        return self.arenas[memory_id - 1]

    @property
    def planned_bytes(self) -> int:
        return sum(a.nbytes for a in self.arenas)
