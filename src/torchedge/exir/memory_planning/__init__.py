"""Memory planning: pure algorithms over lifetimes and sizes, and the graph pass using them."""

from torchedge.exir.memory_planning.algorithms import (
    Allocation,
    MemoryPlan,
    greedy_by_size,
    lower_bound,
    naive,
)

__all__ = ["Allocation", "MemoryPlan", "greedy_by_size", "naive", "lower_bound"]
