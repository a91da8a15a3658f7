"""Planning across several memories: the pure function, then the pass that uses it."""

import pytest

from tests.conftest import assert_matches, torch_outputs, torchedge_compile
from torchedge.errors import MemoryPlanError
from torchedge.exir.config import ExecutorchBackendConfig
from torchedge.exir.memory_planning import (
    ALGORITHMS,
    Allocation,
    MemoryPlan,
    MemorySpec,
    buffer_sizes,
    greedy_by_size,
    plan_hierarchy,
)
from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass, planned_specs
from torchedge.models import load_model
from torchedge.runtime import Runtime

# A long-lived 1 KiB tensor, a 256 B one, and two short-lived 64 B ones.
ALLOCS = [Allocation(1024, 0, 9), Allocation(64, 2, 3), Allocation(64, 4, 4), Allocation(256, 1, 8)]


@pytest.mark.parametrize("algorithm", ALGORITHMS.values(), ids=list(ALGORITHMS))
def test_one_unbounded_memory_is_the_algorithm_itself(algorithm):
    allocs = ALLOCS + [Allocation(64, 3, 4), Allocation(256, 8, 9)]  # ties in size
    placement = plan_hierarchy(allocs, [MemorySpec(1)], 16, algorithm)
    assert placement == [(1, offset) for offset in algorithm(allocs, 16).offsets]
    assert buffer_sizes(allocs, placement, [MemorySpec(1)]) == [0, algorithm(allocs, 16).total]


def test_small_short_lived_tensors_go_to_the_fast_memory():
    memories = [MemorySpec(1, 128), MemorySpec(2, None)]
    placement = plan_hierarchy(ALLOCS, memories, 16, greedy_by_size)
    # Both 64 B tensors fit (at 0: they are never live together); the others cannot.
    assert placement == [(2, 0), (1, 0), (1, 0), (2, 1024)]
    assert buffer_sizes(ALLOCS, placement, memories) == [0, 64, 1280]


def test_a_capacity_is_never_exceeded():
    allocs = [Allocation(64, 2, 3), Allocation(64, 3, 4)]  # live together at 3
    placement = plan_hierarchy(allocs, [MemorySpec(1, 100), MemorySpec(3, 1000)], 16)
    assert placement == [(1, 0), (3, 0)]
    assert buffer_sizes(allocs, placement, [MemorySpec(1, 100), MemorySpec(3, 1000)]) == [0, 64, 0, 64]


def test_an_impossible_request_says_what_does_not_fit_and_what_is_left():
    # 1024 + 256 bytes are live together, but the larger memory holds 1100.
    memories = [MemorySpec(1, 128), MemorySpec(2, 1100)]
    with pytest.raises(MemoryPlanError) as error:
        plan_hierarchy(ALLOCS, memories, 16, names=["the big scratch", "b", "c", "d"])
    message = str(error.value)
    assert "cannot place the big scratch (1024 bytes, live at instructions 0..9)" in message
    assert "memory 1 (capacity 128) has at most 64 contiguous bytes free" in message
    assert "memory 2 (capacity 1100) has at most 844 contiguous bytes free" in message


@pytest.mark.parametrize(
    "memories, problem",
    [
        ([], "at least one MemorySpec"),
        ([MemorySpec(1), MemorySpec(1, 10)], "distinct"),
        ([MemorySpec(0)], ">= 1"),
        ([MemorySpec(1, -1)], "negative capacity"),
    ],
)
def test_bad_memories_are_refused(memories, problem):
    with pytest.raises(MemoryPlanError, match=problem):
        plan_hierarchy(ALLOCS, memories, 16)


def test_a_broken_algorithm_is_caught():
    def everything_at_zero(allocations, alignment):
        return MemoryPlan([0] * len(allocations), 1024)

    with pytest.raises(MemoryPlanError, match="everything_at_zero returned an invalid plan: allocations"):
        plan_hierarchy(ALLOCS, [MemorySpec(1)], 16, everything_at_zero)


@pytest.fixture(scope="module")
def mlp():
    return load_model("mlp")


def compile_with(model, inputs, memories):
    return torchedge_compile(
        model, inputs, ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(memories=memories))
    )


def planned_specs_of(program):
    return [spec for _, spec in planned_specs(program.graph_module())]


def test_the_pass_defaults_to_one_memory(mlp):
    program = compile_with(*mlp, None)
    sizes = program.graph_module().meta["non_const_buffer_sizes"]
    assert len(sizes) == 2 and sizes[0] == 0
    assert {spec.mem_id for spec in planned_specs_of(program)} == {1}
    assert program.memory_plans["forward"].planned_buffer_sizes == sizes[1:]


def test_the_pass_fills_a_fast_memory_and_the_program_runs(mlp):
    model, inputs = mlp
    program = compile_with(model, inputs, [MemorySpec(1, 512), MemorySpec(2)])
    sizes = program.graph_module().meta["non_const_buffer_sizes"]
    assert sizes[0] == 0 and 0 < sizes[1] <= 512 and sizes[2] > 0
    assert {spec.mem_id for spec in planned_specs_of(program)} == {1, 2}
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    assert_matches(method.execute([t.numpy() for t in inputs]), torch_outputs(model, inputs))
