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

from torchedge.errors import InputError, InvalidProgramError, MemoryPlanError
from torchedge.kernels.allocator import aligned_bytes

__all__ = ["MemoryManager", "caller_arenas", "caller_buffer", "ARENA_ALIGNMENT"]

# A caller's arena must start on this boundary: planned offsets are aligned for their dtypes
# (at most 16 bytes, complex128) relative to the arena's start.
ARENA_ALIGNMENT = 16


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
        self.runtime_allocator = None  # the caller's ``allocator(nbytes)`` for run-time allocations

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Runtime allocation for a data-dependent output, bounded by ``max_runtime_bytes``."""
        nbytes = math.prod(int(s) for s in shape) * dtype.itemsize
        if self.runtime_bytes + nbytes > self.max_runtime_bytes:
            raise MemoryPlanError(
                f"runtime allocation of {nbytes} bytes for shape {list(shape)} would exceed "
                f"the limit of {self.max_runtime_bytes} bytes"
            )
        what = f"runtime allocation of shape {list(shape)} ({dtype})"
        if self.runtime_allocator is None:
            buffer = allocate_bytes(nbytes, what)
        else:
            buffer = caller_buffer(self.runtime_allocator(nbytes), nbytes, what, dtype.itemsize)
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


def caller_buffer(buffer, nbytes: int, what: str, alignment: int = ARENA_ALIGNMENT) -> np.ndarray:
    """The first ``nbytes`` of a caller's memory as a writable 1-D uint8 array, without a copy.

    ``buffer``: a C-contiguous uint8 NumPy array (a ``np.memmap`` too) or a writable object with
    the buffer protocol (``bytearray``, ``mmap.mmap``, ``memoryview``). Raises `InputError` for
    anything else (read-only, another dtype, not contiguous, not ``alignment``-aligned) and
    `MemoryPlanError` when it is smaller than ``nbytes``."""
    if not isinstance(buffer, np.ndarray):
        try:
            buffer = np.frombuffer(buffer, np.uint8)
        except (TypeError, ValueError):
            raise InputError(
                f"{what}: expected a writable uint8 NumPy array or buffer, got {type(buffer).__name__}"
            ) from None
    if buffer.dtype != np.uint8:
        raise InputError(f"{what}: expected a uint8 array, got dtype {buffer.dtype} (view it as uint8)")
    if not buffer.flags.writeable:
        raise InputError(f"{what}: expected writable memory, got a read-only {type(buffer).__name__}")
    if not buffer.flags.c_contiguous:
        raise InputError(f"{what}: expected contiguous memory, got a strided array")
    buffer = buffer.reshape(-1)
    if buffer.nbytes < nbytes:
        raise MemoryPlanError(f"{what}: the plan needs {nbytes} bytes, the memory given has {buffer.nbytes}")
    if nbytes and buffer.ctypes.data % alignment:
        raise InputError(
            f"{what}: memory must start on a {alignment}-byte boundary, got an address "
            f"{buffer.ctypes.data % alignment} bytes past one "
            "(torchedge.kernels.allocator.aligned_bytes makes aligned arrays)"
        )
    return buffer[:nbytes]


def caller_arenas(planned_sizes, planned_memory, owned_by_program=()) -> dict[int, np.ndarray]:
    """The caller's arenas by 1-based memory id, checked against ``planned_sizes``.

    ``planned_memory``: one buffer per planned memory id, in id order (``None``: the runtime
    allocates that one), a dict ``{memory_id: buffer}``, or an allocator
    ``allocate(memory_id, nbytes) -> buffer`` called once per id. ``owned_by_program``: ids
    holding state the program shares between methods, which it keeps in its own memory."""
    ids = range(1, len(planned_sizes) + 1)
    owned = set(owned_by_program)
    if callable(planned_memory):
        given = {m: planned_memory(m, planned_sizes[m - 1]) for m in ids if m not in owned}
    elif isinstance(planned_memory, dict):
        given = dict(planned_memory)
    elif isinstance(planned_memory, (list, tuple)):
        if len(planned_memory) != len(planned_sizes):
            raise InputError(
                f"planned_memory: the method plans {len(planned_sizes)} memory id(s) "
                f"(sizes {list(planned_sizes)}), got {len(planned_memory)} buffer(s)"
            )
        given = dict(zip(ids, planned_memory))
    else:
        raise InputError(
            "planned_memory: expected a list of buffers (one per memory id), a dict {memory_id: buffer} "
            f"or an allocator(memory_id, nbytes), got {type(planned_memory).__name__}"
        )
    arenas = {}
    for memory_id, buffer in given.items():
        if buffer is None:
            continue
        if memory_id not in ids:
            raise InputError(f"planned_memory: the method plans memory ids 1..{len(planned_sizes)}, got id {memory_id}")
        if memory_id in owned:
            raise InputError(
                f"planned_memory: memory id {memory_id} holds state the program's methods share; "
                "the program keeps it in its own memory (pass None for it)"
            )
        arenas[memory_id] = caller_buffer(buffer, planned_sizes[memory_id - 1], f"planned memory id {memory_id}")
    return arenas
