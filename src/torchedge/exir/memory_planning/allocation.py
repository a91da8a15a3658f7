"""The plain data every memory-planning algorithm works on.

An algorithm takes a list of `Allocation` (size in bytes, first and last
instruction index that touch the tensor, inclusive) and an alignment, and
returns a `MemoryPlan` with one byte offset per allocation such that no two
allocations whose lifetimes overlap share a byte. Offsets are multiples of the
alignment and every tensor occupies its size rounded up to the alignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["Allocation", "MemoryPlan", "Algorithm", "align_up", "live_sets", "lower_bound"]


@dataclass(frozen=True)
class Allocation:
    """One tensor to place: ``size`` bytes, live from ``start`` to ``end`` inclusive."""

    size: int
    start: int
    end: int

    def overlaps(self, other: "Allocation") -> bool:
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
