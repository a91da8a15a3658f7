"""An exact planner for small instances: branch and bound over placement orders.

Placing tensors one by one at the lowest free offset (first fit) reaches an
optimal plan for some order, and for one in which the offsets come out
non-decreasing (ties by index): take an optimal plan, re-place its tensors in
order of their offsets, and repeat; offsets never rise, so this settles on
such an order. The search enumerates only those orders and prunes a branch
when a bound on its final size is no better than the best plan found.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchedge.exir.memory_planning.allocation import Allocation, MemoryPlan, align_up, live_sets, lower_bound
from torchedge.exir.memory_planning.greedy import greedy_by_size

__all__ = ["exact", "MAX_EXACT_TENSORS"]

MAX_EXACT_TENSORS = 12
_NODE_BUDGET = 50_000


def first_fit(busy: list[tuple[int, int]], size: int) -> int:
    """The lowest offset where ``size`` bytes miss every ``busy`` byte range."""
    cursor = 0
    for lo, hi in sorted(busy):
        if lo - cursor >= size:
            return cursor
        cursor = max(cursor, hi)
    return cursor


@dataclass
class _Search:
    allocations: list[Allocation]
    sizes: list[int]
    steps: list[list[int]]
    floor: int
    best: MemoryPlan
    nodes: int = 0

    def done(self) -> bool:
        return self.best.total <= self.floor or self.nodes >= _NODE_BUDGET

    def bound(self, offsets: dict[int, int], last: int) -> int:
        """Final size of any completion: tensors still to come sit at or above ``last``."""
        need = 0
        for live in self.steps:
            above = sum(self.sizes[i] if i not in offsets else max(0, offsets[i] + self.sizes[i] - last)
                        for i in live)
            need = max(need, last + above)
        return need

    def extend(self, offsets: dict[int, int], last: tuple[int, int], top: int) -> None:
        self.nodes += 1
        if len(offsets) == len(self.allocations):
            self.best = MemoryPlan([offsets[i] for i in range(len(offsets))], top)
            return
        for i in sorted(set(range(len(self.allocations))) - offsets.keys(), key=lambda i: -self.sizes[i]):
            if self.done():
                return
            busy = [(o, o + self.sizes[j]) for j, o in offsets.items()
                    if self.allocations[j].overlaps(self.allocations[i])]
            offset = first_fit(busy, self.sizes[i])
            if (offset, i) < last:
                continue
            offsets[i] = offset
            if max(top, offset + self.sizes[i], self.bound(offsets, offset)) < self.best.total:
                self.extend(offsets, (offset, i), max(top, offset + self.sizes[i]))
            del offsets[i]


def exact(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """An optimal plan for up to `MAX_EXACT_TENSORS` tensors.

    The search starts from `greedy_by_size`, stops as soon as it meets the lower
    bound, and gives up after a fixed number of search nodes, keeping the best
    plan found; larger inputs get the `greedy_by_size` plan unsearched.
    """
    seed = greedy_by_size(allocations, alignment)
    if len(allocations) > MAX_EXACT_TENSORS:
        return seed
    sizes = [align_up(a.size, alignment) for a in allocations]
    search = _Search(allocations, sizes, live_sets(allocations), lower_bound(allocations, alignment), seed)
    if not search.done():
        search.extend({}, (-1, -1), 0)
    return search.best
