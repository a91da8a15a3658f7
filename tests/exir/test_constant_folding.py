"""Constant subgraphs are evaluated at compile time; results still match eager on both runtimes."""

import torch

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_compile, torchedge_run
from torchedge.exir import EdgeCompileConfig, to_edge


class UsesConstantMath(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 32)

    def forward(self, x):
        positions = torch.arange(x.shape[-1], dtype=torch.float32)  # no input: folded
        table = torch.cos(positions / 10.0)  # folded
        return self.linear(x * table)  # weight transpose: folded


def _ops(program):
    return {f"{o.name}.{o.overload}" for o in program.program.execution_plan[0].operators}


def test_folding_removes_constant_work_and_memory():
    model, inputs = UsesConstantMath().eval(), (torch.randn(4, 16),)
    exported = torch.export.export(model, inputs)
    folded = to_edge(exported).to_executorch()
    unfolded = to_edge(exported, compile_config=EdgeCompileConfig(fold_constants=False)).to_executorch()
    assert {"aten::arange.start_out", "aten::cos.out", "aten::permute_copy.out"} <= _ops(unfolded)
    assert not {"aten::arange.start_out", "aten::cos.out", "aten::permute_copy.out"} & _ops(folded)
    assert (
        folded.memory_plans["forward"].planned_buffer_sizes[0]
        < unfolded.memory_plans["forward"].planned_buffer_sizes[0]
    )
    expected = torch_outputs(model, inputs)
    for program in (folded, unfolded):
        assert_matches(torchedge_run(program.buffer, inputs), expected)
        assert_matches(executorch_run(program.buffer, inputs), expected)


def test_folded_program_keeps_user_inputs_in_order():
    class TwoInputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 5))

        def forward(self, a, b):
            return a @ self.w.t() + b

    model, inputs = TwoInputs().eval(), (torch.randn(2, 5), torch.randn(2, 3))
    program = torchedge_compile(model, inputs)
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs))
