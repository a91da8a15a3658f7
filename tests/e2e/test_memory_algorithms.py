"""Every spine model runs correctly under every memory-planning algorithm."""

import functools

import pytest
import torch

from tests.conftest import assert_matches, torch_outputs, torchedge_run
from torchedge.exir import ExecutorchBackendConfig, to_edge
from torchedge.exir.memory_planning import ALGORITHMS
from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass


@functools.cache
def _edge(name):
    from torchedge.models import load_model

    model, inputs = load_model(name)
    return to_edge(torch.export.export(model, inputs)), inputs, torch_outputs(model, inputs)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("name", ["mlp", "cnn", "mobilenet_v2", "llama"])
def test_model_under_algorithm(name, algorithm):
    edge, inputs, expected = _edge(name)
    planner = MemoryPlanningPass(ALGORITHMS[algorithm])
    program = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planner))
    summary = program.memory_plans["forward"]
    assert summary.planned_buffer_sizes[0] >= summary.lower_bound
    assert_matches(torchedge_run(program.buffer, inputs), expected)
