"""Memory-planning algorithms: pure functions over (size, lifetime) records.

An algorithm takes a list of `Allocation` (size in bytes, first and last
instruction index that touch the tensor, inclusive) and an alignment, and
returns a `MemoryPlan` with one byte offset per allocation such that no two
allocations whose lifetimes overlap share a byte.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Allocation", "MemoryPlan", "naive", "greedy_by_size", "lower_bound", "align_up"]


@dataclass(frozen=True)
class Allocation:
    size: int
    start: int
    end: int

    def overlaps(self, other: "Allocation") -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class MemoryPlan:
    offsets: list[int]
    total: int


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def naive(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """Every tensor gets its own bytes: the upper bound any plan must beat."""
    offsets, cursor = [], 0
    for a in allocations:
        offsets.append(cursor)
        cursor += align_up(a.size, alignment)
    return MemoryPlan(offsets, cursor)


def greedy_by_size(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """Greedy by size with best-fit offset search (Pisarchyk & Lee, 2020).

    Largest tensors are placed first; each goes into the smallest gap, among the
    already placed tensors whose lifetimes overlap its own, that can hold it.
    """
    order = sorted(range(len(allocations)), key=lambda i: (-allocations[i].size, allocations[i].start))
    offsets = [0] * len(allocations)
    placed: list[int] = []
    total = 0
    for i in order:
        a = allocations[i]
        size = align_up(a.size, alignment)
        busy = sorted((offsets[j], offsets[j] + align_up(allocations[j].size, alignment))
                      for j in placed if allocations[j].overlaps(a))
        best, best_gap, cursor = None, None, 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        offsets[i] = cursor if best is None else best
        placed.append(i)
        total = max(total, offsets[i] + size)
    return MemoryPlan(offsets, total)


def lower_bound(allocations: list[Allocation], alignment: int = 16) -> int:
    """The largest total size of tensors live at the same instruction."""
    events: dict[int, int] = {}
    for a in allocations:
        size = align_up(a.size, alignment)
        events[a.start] = events.get(a.start, 0) + size
        events[a.end + 1] = events.get(a.end + 1, 0) - size
    live = best = 0
    for t in sorted(events):
        live += events[t]
        best = max(best, live)
    return best
