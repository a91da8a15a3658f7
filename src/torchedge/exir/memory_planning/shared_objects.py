"""ExecuTorch's greedy planner (``exir.memory_planning.greedy``): the baseline to beat.

Tensors, largest first, are packed into "shared objects": fixed-size slabs
laid end to end. A tensor goes at offset 0 of the first slab where it overlaps
no member in time; failing that, on top of the members it overlaps in the
first slab where that still fits; failing that, into a new slab of its own
size. The arena is the sum of the slab sizes. ExecuTorch sorts a set of specs
ascending by size and reverses the list, so equal sizes come last-first; here
they come in reverse input order, which is what a set of freshly made specs
yields in practice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchedge.exir.memory_planning.allocation import Allocation, MemoryPlan, align_up

__all__ = ["executorch_greedy"]


@dataclass
class _Slab:
    size: int
    members: list[tuple[int, int]] = field(default_factory=list)  # (allocation index, offset in slab)

    def top_of_overlapping(self, allocations: list[Allocation], i: int, sizes: list[int]) -> int | None:
        """Highest end among members live with ``i``; None when no member is."""
        ends = [offset + sizes[j] for j, offset in self.members if allocations[j].overlaps(allocations[i])]
        return max(ends, default=None)


def _slot(slabs: list[_Slab], allocations: list[Allocation], i: int, sizes: list[int]) -> tuple[_Slab, int] | None:
    tops = [slab.top_of_overlapping(allocations, i, sizes) for slab in slabs]
    for slab, top in zip(slabs, tops):
        if top is None:
            return slab, 0
    for slab, top in zip(slabs, tops):
        if top is not None and top > 0 and top + sizes[i] <= slab.size:
            return slab, top
    return None


def executorch_greedy(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """ExecuTorch's default planner: shared slabs, largest tensors first."""
    sizes = [align_up(a.size, alignment) for a in allocations]
    order = sorted(range(len(allocations)), key=lambda i: sizes[i])[::-1]
    slabs: list[_Slab] = []
    for i in order:
        slot = _slot(slabs, allocations, i, sizes)
        if slot is None:
            slabs.append(_Slab(sizes[i]))
            slot = slabs[-1], 0
        slot[0].members.append((i, slot[1]))
    offsets, base = [0] * len(allocations), 0
    for slab in slabs:
        for i, offset in slab.members:
            offsets[i] = base + offset
        base += slab.size
    return MemoryPlan(offsets, base)
