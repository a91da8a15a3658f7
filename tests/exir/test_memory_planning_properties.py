"""Properties of every memory planner and of the hierarchy, over random lifetimes and sizes."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchedge.errors import MemoryPlanError
from torchedge.exir.memory_planning import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    Allocation,
    MemoryPlan,
    MemorySpec,
    align_up,
    check_plan,
    exact,
    lower_bound,
    naive,
    plan_hierarchy,
)

SETTINGS = settings(max_examples=100, deadline=None)


@st.composite
def allocation(draw, max_size=5000, max_start=30, max_length=10):
    start = draw(st.integers(0, max_start))
    return Allocation(draw(st.integers(0, max_size)), start, start + draw(st.integers(0, max_length)))


allocations = st.lists(allocation(), max_size=30)
alignments = st.sampled_from([1, 16, 64])


def assert_valid(allocs, plan, alignment):
    """Pairwise, independent of `check_plan`: no two tensors live together share a byte."""
    assert len(plan.offsets) == len(allocs)
    for i, a in enumerate(allocs):
        assert plan.offsets[i] % alignment == 0
        assert plan.offsets[i] + align_up(a.size, alignment) <= plan.total
        for j, b in enumerate(allocs[:i]):
            if a.overlaps(b) and a.size and b.size:
                low, high = sorted([(plan.offsets[i], a.size), (plan.offsets[j], b.size)])
                assert low[0] + low[1] <= high[0], f"tensors {i} and {j} are live together and share bytes"


@pytest.mark.parametrize("algorithm", ALGORITHMS.values(), ids=list(ALGORITHMS))
@SETTINGS
@given(allocs=allocations, alignment=alignments)
def test_every_plan_is_valid_and_between_the_bounds(algorithm, allocs, alignment):
    plan = algorithm(allocs, alignment)
    assert_valid(allocs, plan, alignment)
    assert check_plan(allocs, plan, alignment) is None
    assert lower_bound(allocs, alignment) <= plan.total <= naive(allocs, alignment).total


@SETTINGS
@given(allocs=allocations, alignment=alignments)
def test_the_default_is_the_best_of_all(allocs, alignment):
    best = DEFAULT_ALGORITHM(allocs, alignment).total
    assert all(best <= a(allocs, alignment).total for a in ALGORITHMS.values())


@SETTINGS
@given(
    allocs=st.lists(allocation(max_size=100, max_start=6, max_length=4), min_size=1, max_size=8),
    offsets=st.lists(st.integers(0, 20), min_size=8, max_size=8),
)
def test_check_plan_agrees_with_the_pairwise_check(allocs, offsets):
    plan = MemoryPlan([16 * o for o in offsets[: len(allocs)]], 16 * 20 + 112)
    try:
        assert_valid(allocs, plan, 16)
        valid = True
    except AssertionError:
        valid = False
    assert (check_plan(allocs, plan, 16) is None) == valid


def brute_force_optimum(units: list[tuple[int, int, int]]) -> int:
    """Smallest height (in units) at which some choice of integer offsets packs every tensor."""

    def packs(height, placed, rest):
        if not rest:
            return True
        size, start, end = rest[0]
        for offset in range(height - size + 1):
            if all(e < start or end < s or offset + size <= o or o + z <= offset for o, z, s, e in placed):
                if packs(height, placed + [(offset, size, start, end)], rest[1:]):
                    return True
        return False

    height = 0
    while not packs(height, [], units):
        height += 1
    return height


@SETTINGS
@given(units=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 4), st.integers(0, 3)), min_size=1, max_size=5))
def test_exact_finds_the_optimum(units):
    units = [(size, start, start + length) for size, start, length in units]
    allocs = [Allocation(16 * size, start, end) for size, start, end in units]
    assert exact(allocs, 16).total == 16 * brute_force_optimum(units)


memories = st.lists(st.integers(0, 4000), min_size=1, max_size=3).map(
    lambda caps: [MemorySpec(i + 1, cap) for i, cap in enumerate(caps)]
)


@SETTINGS
@given(allocs=allocations, memories=memories, unbounded=st.booleans())
def test_hierarchy_respects_capacities(allocs, memories, unbounded):
    if unbounded:
        memories = memories + [MemorySpec(len(memories) + 1, None)]
    try:
        placement = plan_hierarchy(allocs, memories, 16)
    except MemoryPlanError:
        assert not unbounded
        return
    assert len(placement) == len(allocs)
    for memory in memories:
        mine = [i for i, (mem_id, _) in enumerate(placement) if mem_id == memory.mem_id]
        sub = [allocs[i] for i in mine]
        extent = max((placement[i][1] + align_up(allocs[i].size, 16) for i in mine), default=0)
        assert_valid(sub, MemoryPlan([placement[i][1] for i in mine], extent), 16)
        assert memory.capacity is None or extent <= memory.capacity


@SETTINGS
@given(allocs=st.lists(allocation(), min_size=1, max_size=30), memories=memories)
def test_hierarchy_fails_only_when_it_must_or_may(allocs, memories):
    largest = max(align_up(a.size, 16) for a in allocs)
    if all(m.capacity < largest for m in memories):
        with pytest.raises(MemoryPlanError, match="cannot place"):
            plan_hierarchy(allocs, memories, 16)
    elif memories[0].capacity >= naive(allocs, 16).total:
        assert {mem_id for mem_id, _ in plan_hierarchy(allocs, memories, 16)} == {1}
