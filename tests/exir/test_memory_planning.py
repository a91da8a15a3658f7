"""Memory-planning algorithms against hand-computed values and brute-force checks."""

import random

import pytest

from torchedge.exir.memory_planning import Allocation, greedy_by_size, lower_bound, naive
from torchedge.exir.memory_planning.algorithms import align_up


def _assert_valid(allocations, plan, alignment=16):
    for i, a in enumerate(allocations):
        assert plan.offsets[i] % alignment == 0
        assert plan.offsets[i] + a.size <= plan.total
        for j in range(i):
            b = allocations[j]
            if a.overlaps(b) and a.size and b.size:
                disjoint = (plan.offsets[i] + a.size <= plan.offsets[j]
                            or plan.offsets[j] + b.size <= plan.offsets[i])
                assert disjoint, f"tensors {i} and {j} are live together and share bytes"


def test_chain_reuses_memory():
    # x -> a -> b -> c: each tensor only overlaps its neighbours, so two slots suffice.
    allocations = [Allocation(64, 0, 1), Allocation(64, 1, 2), Allocation(64, 2, 3), Allocation(64, 3, 4)]
    plan = greedy_by_size(allocations)
    _assert_valid(allocations, plan)
    assert plan.total == 128
    assert lower_bound(allocations) == 128
    assert naive(allocations).total == 256


@pytest.mark.parametrize("seed", range(20))
def test_random_plans_are_valid_and_bounded(seed):
    rng = random.Random(seed)
    allocations = []
    for _ in range(rng.randint(1, 40)):
        start = rng.randint(0, 30)
        allocations.append(Allocation(rng.randint(0, 5000), start, start + rng.randint(0, 10)))
    plan = greedy_by_size(allocations)
    _assert_valid(allocations, plan)
    assert lower_bound(allocations) <= plan.total <= naive(allocations).total


def test_align_up():
    assert [align_up(n, 16) for n in (0, 1, 16, 17)] == [0, 16, 16, 32]
