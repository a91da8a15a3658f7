"""Planning across a memory hierarchy: small fast memories first, then the rest.

Memories are filled in the order given. A memory with a capacity takes the
tensors with the smallest footprint (size x lifetime: small, short-lived,
hence hot per byte) first, each at its best-fit offset below the capacity,
and skips those that do not fit; the chosen set is then re-planned with the
algorithm when that packs it tighter. A memory without a capacity takes all
that is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchedge.errors import MemoryPlanError
from torchedge.exir.memory_planning.algorithms import DEFAULT_ALGORITHM
from torchedge.exir.memory_planning.allocation import Algorithm, Allocation, MemoryPlan, align_up, check_plan
from torchedge.exir.memory_planning.greedy import best_fit

__all__ = ["MemorySpec", "plan_hierarchy", "buffer_sizes"]

Placement = list[tuple[int, int]]


@dataclass(frozen=True)
class MemorySpec:
    """One memory id of the program and its capacity in bytes (None: unbounded)."""

    mem_id: int
    capacity: int | None = None


def _check(memories: list[MemorySpec]) -> None:
    if not memories:
        raise MemoryPlanError("no memories to plan into: pass at least one MemorySpec")
    ids = [m.mem_id for m in memories]
    if len(set(ids)) != len(ids) or min(ids) < 1:
        raise MemoryPlanError(f"memory ids must be distinct and >= 1 (0 holds constants), got {ids}")
    for m in memories:
        if m.capacity is not None and m.capacity < 0:
            raise MemoryPlanError(f"memory {m.mem_id} has a negative capacity {m.capacity}")


def _run(algorithm: Algorithm, allocations: list[Allocation], alignment: int) -> MemoryPlan:
    plan = algorithm(allocations, alignment)
    problem = check_plan(allocations, plan, alignment)
    if problem:
        raise MemoryPlanError(
            f"memory-planning algorithm {getattr(algorithm, '__name__', algorithm)} returned an invalid plan: {problem}"
        )
    return plan


def _busy(allocations: list[Allocation], offsets: dict[int, int], i: int, alignment: int) -> list[tuple[int, int]]:
    return [
        (o, o + align_up(allocations[j].size, alignment))
        for j, o in offsets.items()
        if allocations[j].overlaps(allocations[i])
    ]


def _fill(
    allocations: list[Allocation], candidates: list[int], capacity: int, alignment: int, algorithm: Algorithm
) -> dict[int, int]:
    """Offsets of the candidates that fit below ``capacity``, taken in order."""
    offsets: dict[int, int] = {}
    for i in candidates:
        offset = best_fit(
            _busy(allocations, offsets, i, alignment), align_up(allocations[i].size, alignment), limit=capacity
        )
        if offset is not None:
            offsets[i] = offset
    chosen = sorted(offsets)
    replan = _run(algorithm, [allocations[i] for i in chosen], alignment)
    used = max((o + align_up(allocations[i].size, alignment) for i, o in offsets.items()), default=0)
    return dict(zip(chosen, replan.offsets)) if replan.total < used else offsets


def _largest_gap(busy: list[tuple[int, int]], capacity: int) -> int:
    gap, cursor = 0, 0
    for lo, hi in sorted(busy) + [(capacity, capacity)]:
        gap, cursor = max(gap, lo - cursor), max(cursor, hi)
    return gap


def _unplaceable(
    allocations: list[Allocation],
    i: int,
    memories: list[MemorySpec],
    per_memory: dict[int, dict[int, int]],
    alignment: int,
    names: list[str] | None,
) -> MemoryPlanError:
    a = allocations[i]
    free = "; ".join(
        f"memory {m.mem_id} (capacity {m.capacity}) has at most "
        f"{_largest_gap(_busy(allocations, per_memory[m.mem_id], i, alignment), m.capacity)} contiguous bytes free"
        for m in memories
    )
    name = names[i] if names else f"tensor {i}"
    return MemoryPlanError(
        f"cannot place {name} ({a.size} bytes, live at instructions {a.start}..{a.end}): {free} "
        "while it is live; raise a capacity or add a memory with capacity None"
    )


def plan_hierarchy(
    allocations: list[Allocation],
    memories: list[MemorySpec],
    alignment: int = 16,
    algorithm: Algorithm = DEFAULT_ALGORITHM,
    names: list[str] | None = None,
) -> Placement:
    """One ``(mem_id, offset)`` per allocation, never exceeding a memory's capacity.

    ``names`` label the allocations in the `MemoryPlanError` raised when some
    tensor fits in no memory.
    """
    _check(memories)
    remaining = sorted(
        range(len(allocations)),
        key=lambda i: (allocations[i].size * (allocations[i].end - allocations[i].start + 1), allocations[i].size, i),
    )
    per_memory: dict[int, dict[int, int]] = {}
    for memory in memories:
        if memory.capacity is None:
            chosen = sorted(remaining)
            plan = _run(algorithm, [allocations[i] for i in chosen], alignment)
            per_memory[memory.mem_id] = dict(zip(chosen, plan.offsets))
        else:
            per_memory[memory.mem_id] = _fill(allocations, remaining, memory.capacity, alignment, algorithm)
        remaining = [i for i in remaining if i not in per_memory[memory.mem_id]]
    if remaining:
        raise _unplaceable(allocations, remaining[0], memories, per_memory, alignment, names)
    placement: Placement = [(0, 0)] * len(allocations)
    for mem_id, offsets in per_memory.items():
        for i, offset in offsets.items():
            placement[i] = (mem_id, offset)
    return placement


def buffer_sizes(
    allocations: list[Allocation], placement: Placement, memories: list[MemorySpec], alignment: int = 16
) -> list[int]:
    """Arena size per memory id, indexed by id; index 0 (constants) is 0."""
    sizes = [0] * (max(m.mem_id for m in memories) + 1)
    for a, (mem_id, offset) in zip(allocations, placement):
        sizes[mem_id] = max(sizes[mem_id], offset + align_up(a.size, alignment))
    return sizes
