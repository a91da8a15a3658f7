"""Memory planning: pure algorithms over lifetimes and sizes, and the graph pass using them.

Modules: `allocation` (the data), `greedy` (best-fit orderings), `shared_objects`
(ExecuTorch's planner, the baseline), `branch_and_bound` (the exact planner for small
inputs), `algorithms` (the catalogue and `best_of`), `hierarchy` (several
memories with capacities), `planning_pass` (the graph pass).
"""

from torchedge.exir.memory_planning.algorithms import ALGORITHMS, DEFAULT_ALGORITHM, best_of, naive
from torchedge.exir.memory_planning.allocation import (
    Algorithm,
    Allocation,
    MemoryPlan,
    align_up,
    check_plan,
    lower_bound,
)
from torchedge.exir.memory_planning.branch_and_bound import exact
from torchedge.exir.memory_planning.greedy import (
    greedy_by_area,
    greedy_by_breadth,
    greedy_by_length,
    greedy_by_size,
    greedy_by_size_then_length,
)
from torchedge.exir.memory_planning.hierarchy import MemorySpec, buffer_sizes, plan_hierarchy
from torchedge.exir.memory_planning.shared_objects import executorch_greedy

__all__ = [
    "Algorithm",
    "Allocation",
    "MemoryPlan",
    "align_up",
    "lower_bound",
    "check_plan",
    "naive",
    "executorch_greedy",
    "greedy_by_size",
    "greedy_by_size_then_length",
    "greedy_by_length",
    "greedy_by_area",
    "greedy_by_breadth",
    "exact",
    "best_of",
    "ALGORITHMS",
    "DEFAULT_ALGORITHM",
    "MemorySpec",
    "plan_hierarchy",
    "buffer_sizes",
]
