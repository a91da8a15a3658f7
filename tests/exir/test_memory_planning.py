"""Memory-planning algorithms against hand-computed plans."""

import pytest

from torchedge.exir.memory_planning import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    Allocation,
    MemoryPlan,
    align_up,
    best_of,
    check_plan,
    exact,
    executorch_greedy,
    greedy_by_breadth,
    greedy_by_size,
    greedy_by_size_then_length,
    lower_bound,
    naive,
)

PLANNERS = [a for name, a in ALGORITHMS.items() if name != "naive"]

# MobileNetV2's widest stretch, in units of 16 bytes: one tensor of 50 and three of 48
# whose lifetimes chain; largest-first best fit stacks three of them (144), while the
# optimum puts the last 48 beside the 50 (98, the lower bound).
WIDEST_STRETCH = [
    Allocation(50 * 16, 357, 360),
    Allocation(48 * 16, 348, 353),
    Allocation(48 * 16, 350, 356),
    Allocation(48 * 16, 355, 358),
]

# Two instances whose optimum is 16 bytes above the lower bound (checked by exhaustive
# search over every offset): (size in units of 16, start, end).
GAP_INSTANCES = [
    [(1, 8, 9), (3, 6, 8), (2, 2, 3), (2, 9, 9), (2, 0, 4), (1, 4, 9), (2, 3, 5), (3, 5, 5), (2, 9, 9), (3, 0, 1)],
    [(2, 8, 8), (3, 7, 10), (2, 4, 8), (1, 1, 2), (2, 3, 6), (3, 0, 4), (2, 5, 7), (3, 9, 10), (1, 10, 10), (3, 0, 0)],
]


@pytest.mark.parametrize("algorithm", PLANNERS, ids=lambda a: a.__name__)
def test_chain_reuses_memory(algorithm):
    # x -> a -> b -> c: each tensor only overlaps its neighbours, so two slots suffice.
    allocations = [Allocation(64, 0, 1), Allocation(64, 1, 2), Allocation(64, 2, 3), Allocation(64, 3, 4)]
    plan = algorithm(allocations, 16)
    assert check_plan(allocations, plan) is None
    assert plan.total == lower_bound(allocations) == 128
    assert naive(allocations).total == 256


def test_lower_bound_is_the_widest_instant():
    allocations = [Allocation(10, 0, 2), Allocation(20, 1, 1), Allocation(40, 3, 3)]
    assert lower_bound(allocations, 16) == 48  # 16 + 32 at instant 1, 48 at instant 3
    assert lower_bound([], 16) == 0


def test_size_greedy_orderings_on_the_widest_stretch():
    assert greedy_by_size(WIDEST_STRETCH).offsets == [0, 0, 48 * 16, 96 * 16]
    assert greedy_by_size(WIDEST_STRETCH).total == 144 * 16
    # Longest-lived first among equal sizes: the 48 that outlives its neighbours goes low.
    assert greedy_by_size_then_length(WIDEST_STRETCH).offsets == [0, 48 * 16, 0, 50 * 16]
    assert greedy_by_size_then_length(WIDEST_STRETCH).total == lower_bound(WIDEST_STRETCH) == 98 * 16


def test_executorch_greedy_packs_shared_slabs():
    # Equal sizes come last-first: the 48 at 355..358 cannot share the 50's slab and opens
    # its own; the other two 48s each find a slab where no member overlaps them.
    assert executorch_greedy(WIDEST_STRETCH) == MemoryPlan([0, 50 * 16, 0, 50 * 16], 98 * 16)
    # A tensor that overlaps slab members goes on top of them while the slab is tall enough.
    allocations = [Allocation(96, 0, 0), Allocation(32, 1, 2), Allocation(32, 2, 3)]
    assert executorch_greedy(allocations) == MemoryPlan([0, 32, 0], 96)


def test_executorch_greedy_misses_gaps_below_slab_members():
    # The 48 overlaps only the 64, which sits at 80 in the 160 slab: on top of it there is
    # no room, so ExecuTorch opens a slab; best fit finds the free 80 bytes under it.
    allocations = [Allocation(160, 5, 5), Allocation(80, 0, 1), Allocation(64, 1, 2), Allocation(48, 2, 3)]
    assert executorch_greedy(allocations) == MemoryPlan([0, 0, 80, 160], 208)
    assert greedy_by_size(allocations) == MemoryPlan([0, 0, 80, 0], 160)


def test_greedy_by_breadth_starts_from_the_widest_step():
    # Step 1 holds 16 + 64 + 32 bytes: its tensors go first, largest first, then step 2's 48.
    allocations = [Allocation(16, 0, 1), Allocation(64, 1, 1), Allocation(32, 1, 2), Allocation(48, 2, 2)]
    assert greedy_by_breadth(allocations) == MemoryPlan([96, 0, 64, 0], 112)


@pytest.mark.parametrize("items", GAP_INSTANCES)
def test_exact_proves_an_optimum_above_the_lower_bound(items):
    allocations = [Allocation(size * 16, start, end) for size, start, end in items]
    plan = exact(allocations)
    assert check_plan(allocations, plan) is None
    assert plan.total == lower_bound(allocations) + 16


def test_exact_reaches_the_lower_bound_where_greedy_does_not():
    assert exact(WIDEST_STRETCH).total == lower_bound(WIDEST_STRETCH)
    assert DEFAULT_ALGORITHM(WIDEST_STRETCH, 16).total == lower_bound(WIDEST_STRETCH)


def test_best_of_keeps_the_smallest_and_the_first_on_ties():
    def big(allocations, alignment):
        return naive(allocations, alignment)

    choose = best_of([big, greedy_by_size, greedy_by_size_then_length])
    assert choose(WIDEST_STRETCH, 16) == greedy_by_size_then_length(WIDEST_STRETCH)
    chain = [Allocation(64, 0, 1), Allocation(64, 1, 2)]
    assert best_of([greedy_by_size, naive])(chain, 16) == naive(chain)  # both 128: the first wins
    assert choose.__name__ == "best_of(big, greedy_by_size, greedy_by_size_then_length)"


def test_check_plan_names_the_problem():
    allocations = [Allocation(20, 0, 1), Allocation(20, 1, 2)]
    assert check_plan(allocations, MemoryPlan([0, 32], 64)) is None
    assert "share bytes" in check_plan(allocations, MemoryPlan([0, 16], 64))
    assert "multiple of 16" in check_plan(allocations, MemoryPlan([0, 40], 80))
    assert "past the total" in check_plan(allocations, MemoryPlan([0, 32], 48))
    assert "1 offsets for 2" in check_plan(allocations, MemoryPlan([0], 32))


def test_align_up():
    assert [align_up(n, 16) for n in (0, 1, 16, 17)] == [0, 16, 16, 32]
