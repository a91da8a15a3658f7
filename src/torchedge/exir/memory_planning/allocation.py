"""The plain data every memory-planning algorithm works on.

An algorithm takes a list of `Allocation` (size in bytes, first and last
instruction index that touch the tensor, inclusive) and an alignment, and
returns a `MemoryPlan` with one byte offset per allocation such that no two
allocations whose lifetimes overlap share a byte. Offsets are multiples of the
alignment and every tensor occupies its size rounded up to the alignment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Allocation", "MemoryPlan", "Algorithm", "align_up", "live_sets", "lower_bound", "check_plan"]


@dataclass(frozen=True)
class Allocation:
    """One tensor to place: ``size`` bytes, live from ``start`` to ``end`` inclusive."""

    size: int
    start: int
    end: int

    def overlaps(self, other: Allocation) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class MemoryPlan:
    """One offset per allocation, and the arena size ``total`` they fit in."""

    offsets: list[int]
    total: int


Algorithm = Callable[[list[Allocation], int], MemoryPlan]


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def live_sets(allocations: list[Allocation]) -> list[list[int]]:
    """Indices of the allocations live at each distinct start, in time order.

    Every set of simultaneously live tensors is contained in one of these: the
    latest start at or before an instant sees all that is live at that instant.
    """
    starts = sorted({a.start for a in allocations})
    return [[i for i, a in enumerate(allocations) if a.start <= t <= a.end] for t in starts]


def lower_bound(allocations: list[Allocation], alignment: int = 16) -> int:
    """The largest total (aligned) size of tensors live at the same instruction."""
    sizes = [align_up(a.size, alignment) for a in allocations]
    return max((sum(sizes[i] for i in live) for live in live_sets(allocations)), default=0)


def check_plan(allocations: list[Allocation], plan: MemoryPlan, alignment: int = 16) -> str | None:
    """What is wrong with ``plan`` (the first problem found), or None when it is valid."""
    if len(plan.offsets) != len(allocations):
        return f"{len(plan.offsets)} offsets for {len(allocations)} allocations"
    for i, (a, offset) in enumerate(zip(allocations, plan.offsets)):
        if offset < 0 or offset % alignment:
            return f"allocation {i} is at offset {offset}, not a non-negative multiple of {alignment}"
        if offset + align_up(a.size, alignment) > plan.total:
            return f"allocation {i} ends at {offset + align_up(a.size, alignment)}, past the total {plan.total}"
    for live in live_sets(allocations):
        ranked = sorted((plan.offsets[i], i) for i in live if allocations[i].size)
        for (low, i), (high, j) in zip(ranked, ranked[1:]):
            if low + allocations[i].size > high:
                return f"allocations {i} and {j} are live together and share bytes"
    return None
