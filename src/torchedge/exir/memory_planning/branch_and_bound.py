"""An exact planner for small instances: branch and bound over placement orders.

Placing tensors one by one at the lowest free offset (first fit) reaches an
optimal plan for some order, and for one in which the offsets come out
non-decreasing (ties by index): take an optimal plan, re-place its tensors in
order of their offsets, and repeat; offsets never rise, so this settles on
such an order. The search enumerates only those orders, largest tensors
first. A branch dies when a tensor still to come would fit wholly below the
last offset (its first fit would break the order), or when a bound on its
final size exceeds the size the search is looking for.
"""

from __future__ import annotations

from torchedge.exir.memory_planning.allocation import Allocation, MemoryPlan, align_up, live_sets, lower_bound
from torchedge.exir.memory_planning.greedy import greedy_by_size

__all__ = ["exact", "first_fit", "MAX_EXACT_TENSORS"]

MAX_EXACT_TENSORS = 12
_NODE_BUDGET = 2_000


def first_fit(busy: list[tuple[int, int]], size: int) -> int:
    """The lowest offset where ``size`` bytes miss every ``busy`` byte range."""
    cursor = 0
    for lo, hi in sorted(busy):
        if lo - cursor >= size:
            return cursor
        cursor = max(cursor, hi)
    return cursor


class _Search:
    """Depth-first search state: offsets of the placed tensors (None: not yet)."""

    def __init__(self, allocations: list[Allocation], alignment: int):
        n = len(allocations)
        self.sizes = [align_up(a.size, alignment) for a in allocations]
        self.conflicts = [[j for j in range(n) if j != i and allocations[j].overlaps(allocations[i])] for i in range(n)]
        self.steps = live_sets(allocations)
        self.floor = lower_bound(allocations, alignment)
        self.offsets: list[int | None] = [None] * n
        self.nodes = 0
        self.exceeded = 0

    def first_fit(self, i: int) -> int:
        placed = [(j, offset) for j in self.conflicts[i] if (offset := self.offsets[j]) is not None]
        return first_fit([(offset, offset + self.sizes[j]) for j, offset in placed], self.sizes[i])

    def bound(self, last: int) -> int:
        """Final size of any completion: tensors still to come sit at or above ``last``.

        At each step the placed tensors cover up to some height; a tensor to come
        sits above the highest cover over its lifetime, and those live at one step
        stack: the last of them to start ends no lower than its start plus the
        sizes of all that start no lower.
        """
        cover = [
            max([last] + [self.offsets[i] + self.sizes[i] for i in live if self.offsets[i] is not None])
            for live in self.steps
        ]
        base = [0] * len(self.offsets)
        for height, live in zip(cover, self.steps):
            for i in live:
                base[i] = max(base[i], height)
        need = max(cover)
        for live in self.steps:
            stacked = 0
            for start, size in sorted(
                ((base[i], self.sizes[i]) for i in live if self.offsets[i] is None), reverse=True
            ):
                stacked += size
                need = max(need, start + stacked)
        return need

    def leaves_hole(self, last: int) -> bool:
        """Whether a tensor still to come fits wholly below ``last``.

        Tensors placed from now on sit at or above ``last``, so that tensor would
        find its first fit below ``last``: no order through here is canonical.
        """
        for i, offset in enumerate(self.offsets):
            if offset is None:
                fit = self.first_fit(i)
                if fit < last and fit + self.sizes[i] <= last:
                    return True
        return False

    def fits(self, limit: int, last: tuple[int, int], left: int) -> bool:
        """Complete the placed tensors into a plan within ``limit`` bytes, if any order can.

        Every bound that exceeds the limit is remembered in ``self.exceeded``:
        the smallest of them is the next limit worth trying.
        """
        self.nodes += 1
        if not left:
            return True
        candidates = [i for i, offset in enumerate(self.offsets) if offset is None]
        for i in sorted(candidates, key=lambda i: -self.sizes[i]):
            offset = self.first_fit(i)
            if self.nodes >= _NODE_BUDGET:
                return False
            if (offset, i) < last:
                continue
            self.offsets[i] = offset
            if not self.leaves_hole(offset):
                need = self.bound(offset)
                if need <= limit and self.fits(limit, (offset, i), left - 1):
                    return True
                if need > limit:
                    self.exceeded = min(self.exceeded, need)
            self.offsets[i] = None
        return False


def exact(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """An optimal plan for up to `MAX_EXACT_TENSORS` tensors.

    Iterative deepening: search for a plan within the lower bound, then within
    the smallest size a pruned branch needed, and so on; the first plan found
    is optimal. The search gives up after a fixed number of nodes, and larger
    inputs are not searched: both get the `greedy_by_size` plan.
    """
    seed = greedy_by_size(allocations, alignment)
    if len(allocations) > MAX_EXACT_TENSORS:
        return seed
    search = _Search(allocations, alignment)
    limit = search.floor
    while limit < seed.total and search.nodes < _NODE_BUDGET:
        search.exceeded = seed.total
        if search.fits(limit, (-1, -1), len(allocations)):
            return MemoryPlan(list(search.offsets), max(o + s for o, s in zip(search.offsets, search.sizes)))
        limit = search.exceeded
    return seed
