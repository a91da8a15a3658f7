"""Reshapes of planned tensors share their memory instead of copying it."""

import numpy as np
import torch

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_compile, torchedge_run
from torchedge.schema.program import Tensor
from torchedge.serialize import deserialize_pte


class ReshapeChain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        y = torch.relu(x).reshape(4, 6)  # view of a planned tensor: shared
        w = self.weight.reshape(4, 6)  # view of a constant: folded at compile time
        return (y * w).reshape(2, 12).sigmoid()


def test_views_share_memory_and_run_on_both_runtimes():
    model, inputs = ReshapeChain().eval(), (torch.randn(2, 3, 4),)
    program = torchedge_compile(model, inputs)
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    ops = [f"{o.name}.{o.overload}" for o in plan.operators]
    assert "aten::view_copy.out" not in ops, ops

    placed = {}
    for ev in plan.values:
        t = ev.val
        if isinstance(t, Tensor) and t.allocation_info is not None:
            placed.setdefault(t.allocation_info.memory_offset_low, []).append(tuple(t.sizes))
    assert any((2, 3, 4) in shapes and (4, 6) in shapes for shapes in placed.values()), placed

    expected = torch_outputs(model, inputs)
    assert_matches(torchedge_run(program.buffer, inputs), expected)
    assert_matches(executorch_run(program.buffer, inputs), expected)
    assert np.isfinite(expected[0]).all()
