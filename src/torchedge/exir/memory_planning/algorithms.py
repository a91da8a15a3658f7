"""The catalogue of memory-planning algorithms, and `best_of` to combine them.

Every algorithm has the signature ``algorithm(allocations, alignment) -> MemoryPlan``
(see `allocation`); `DEFAULT_ALGORITHM` is what `MemoryPlanningPass` uses.
"""

from __future__ import annotations

from torchedge.exir.memory_planning.allocation import Algorithm, Allocation, MemoryPlan, align_up
from torchedge.exir.memory_planning.branch_and_bound import exact
from torchedge.exir.memory_planning.greedy import (
    greedy_by_area,
    greedy_by_breadth,
    greedy_by_length,
    greedy_by_size,
    greedy_by_size_then_length,
)
from torchedge.exir.memory_planning.shared_objects import executorch_greedy

__all__ = ["naive", "best_of", "ALGORITHMS", "DEFAULT_ALGORITHM"]


def naive(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
    """Every tensor gets its own bytes: the upper bound any plan must beat."""
    offsets, cursor = [], 0
    for a in allocations:
        offsets.append(cursor)
        cursor += align_up(a.size, alignment)
    return MemoryPlan(offsets, cursor)


def best_of(algorithms: list[Algorithm]) -> Algorithm:
    """An algorithm that runs each of ``algorithms`` and keeps the smallest plan (ties: first)."""

    def best(allocations: list[Allocation], alignment: int = 16) -> MemoryPlan:
        plans = [algorithm(allocations, alignment) for algorithm in algorithms]
        return min(plans, key=lambda plan: plan.total)

    best.__name__ = f"best_of({', '.join(getattr(a, '__name__', repr(a)) for a in algorithms)})"
    return best


ALGORITHMS: dict[str, Algorithm] = {
    a.__name__: a
    for a in (
        naive,
        executorch_greedy,
        greedy_by_size,
        greedy_by_size_then_length,
        greedy_by_length,
        greedy_by_area,
        greedy_by_breadth,
        exact,
    )
}

DEFAULT_ALGORITHM = best_of([a for name, a in ALGORITHMS.items() if name != "naive"])
