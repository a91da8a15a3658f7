"""Greedy offset calculation with best-fit search (Pisarchyk & Lee, 2020).

Every algorithm here is one ordering of the tensors: each tensor, in turn, goes
into the smallest gap, among already placed tensors whose lifetimes overlap its
own, that can hold it, or on top of them when no gap can. Orderings differ in
which tensors claim the low offsets first.
"""

from __future__ import annotations

from torchedge.exir.memory_planning.allocation import Allocation, MemoryPlan, align_up, live_sets

__all__ = [
    "best_fit",
    "place_in_order",
    "greedy_by_size",
    "greedy_by_size_then_length",
    "greedy_by_length",
    "greedy_by_area",
    "greedy_by_breadth",
]


def best_fit(busy: list[tuple[int, int]], size: int, limit: int | None = None) -> int | None:
    """Offset of the smallest gap between ``busy`` byte ranges that holds ``size`` bytes.

    Without ``limit`` the space above the busy ranges is the fallback; with a
    limit it is one more gap, and None means nothing fits below the limit.
    """
    ranges = sorted(busy) + ([(limit, limit)] if limit is not None else [])
    best, best_gap, cursor = None, None, 0
    for lo, hi in ranges:
        gap = lo - cursor
        if gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = cursor, gap
        cursor = max(cursor, hi)
    if best is None and limit is None:
        return cursor
    return best


def place_in_order(allocations: list[Allocation], order: list[int], alignment: int) -> MemoryPlan:
    """Place the allocations one by one in ``order``, each at its best-fit offset."""
    sizes = [align_up(a.size, alignment) for a in allocations]
    offsets = [0] * len(allocations)
    placed: list[int] = []
    for i in order:
        busy = [(offsets[j], offsets[j] + sizes[j]) for j in placed if allocations[j].overlaps(allocations[i])]
        offsets[i] = best_fit(busy, sizes[i]) or 0  # without a limit there is always an offset
        placed.append(i)
    return MemoryPlan(offsets, max((o + s for o, s in zip(offsets, sizes)), default=0))


def _sorted_by(allocations: list[Allocation], key) -> list[int]:
    return sorted(range(len(allocations)), key=lambda i: key(allocations[i]))


def greedy_by_size(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """Largest tensors first, earliest first among equals."""
    return place_in_order(allocations, _sorted_by(allocations, lambda a: (-a.size, a.start)), alignment)


def greedy_by_size_then_length(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """Largest tensors first, longest-lived first among equals."""
    order = _sorted_by(allocations, lambda a: (-a.size, a.start - a.end, a.start))
    return place_in_order(allocations, order, alignment)


def greedy_by_length(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """Longest-lived tensors first (they pin the bottom of the arena), then largest."""
    order = _sorted_by(allocations, lambda a: (a.start - a.end, -a.size, a.start))
    return place_in_order(allocations, order, alignment)


def greedy_by_area(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """Largest size x lifetime first."""
    order = _sorted_by(allocations, lambda a: (-a.size * (a.end - a.start + 1), a.start))
    return place_in_order(allocations, order, alignment)


def greedy_by_breadth(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """Operators with the most live bytes first; within one, its largest tensors first.

    An operator's breadth is the total size of the tensors live at one step of
    the program (a distinct start, see `live_sets`); ties go to the earlier step.
    """
    steps = live_sets(allocations)
    breadth = [sum(allocations[i].size for i in live) for live in steps]
    order: list[int] = []
    seen: set[int] = set()
    for step in sorted(range(len(steps)), key=lambda s: -breadth[s]):
        for i in sorted(steps[step], key=lambda i: (-allocations[i].size, i)):
            if i not in seen:
                seen.add(i)
                order.append(i)
    return place_in_order(allocations, order, alignment)
