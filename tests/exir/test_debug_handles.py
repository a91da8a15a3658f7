"""Debug handles and source stack traces survive every pass down to the emitted instructions."""

import torch

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_run
from torchedge.exir import ExecutorchBackendConfig, to_edge
from torchedge.serialize import deserialize_pte


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        return torch.relu(y) * 2.0 + 1e-3  # scalars become lifted tensors on the way


def test_every_node_and_instruction_keeps_its_handle_and_trace():
    x, model = torch.randn(2, 4), Model().eval()
    edge = to_edge(torch.export.export(model, (x,)))
    calls = [n for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    handles = [n.meta["debug_handle"] for n in calls]
    assert len(set(handles)) == len(handles)
    assert all("test_debug_handles.py" in n.meta.get("stack_trace", "") for n in calls)

    program = edge.to_executorch(ExecutorchBackendConfig(emit_stacktrace=True))
    final = [n for n in program.graph_module().graph.nodes if n.op == "call_function"]
    assert all("debug_handle" in n.meta and n.meta.get("stack_trace") for n in final)
    instruction_handles = program.debug_handle_map["forward"]
    assert instruction_handles and set(instruction_handles) <= set(handles)

    chain = deserialize_pte(program.buffer).program.execution_plan[0].chains[0]
    assert len(chain.stacktrace) == len(chain.instructions)
    for frames in chain.stacktrace:
        assert any(f.filename.endswith("test_debug_handles.py") and f.lineno > 0 for f in frames.items)
    # A program with stack traces still runs on both runtimes.
    expected = torch_outputs(model, (x,))
    assert_matches(torchedge_run(program.buffer, [x]), expected)
    assert_matches(executorch_run(program.buffer, [x]), expected)
