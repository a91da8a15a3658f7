"""The delegation framework: full and partial delegation, several partitions, specs, missing backends."""

import pytest
import torch

from tests.backends.demo_backend import RUNTIME, OpsPartitioner
from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_run
from torchedge.errors import BackendMissingError
from torchedge.exir import to_edge, to_edge_transform_and_lower
from torchedge.exir.backend import to_backend
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x, y):
        a = torch.relu(x + y)  # partition 1: add, relu
        b = torch.sigmoid(self.linear(a))  # portable: linear, sigmoid
        return torch.relu(b * a + y)  # partition 2: mul, add, relu


def _inputs():
    return torch.randn(4, 8), torch.randn(4, 8)


def _plan(buffer):
    return deserialize_pte(buffer).program.execution_plan[0]


def test_partial_delegation_with_two_partitions():
    model, inputs = Model().eval(), _inputs()
    partitioner = OpsPartitioner(
        {"aten.add.Tensor", "aten.relu.default", "aten.mul.Tensor"}, compile_specs=[("threads", b"\x01")]
    )
    program = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[partitioner])
    buffer = program.to_executorch().buffer
    plan = _plan(buffer)
    assert [d.id for d in plan.delegates] == ["NestedPteBackend", "NestedPteBackend"]
    ops = {f"{o.name}.{o.overload}" for o in plan.operators}
    assert "aten::add.out" not in ops and "aten::sigmoid.out" in ops
    assert all(d.processed.location == 1 for d in plan.delegates)  # blobs live in segments

    before = RUNTIME.executions
    assert_matches(torchedge_run(buffer, inputs), torch_outputs(model, inputs))
    assert RUNTIME.executions == before + 2
    assert RUNTIME.seen_specs[-1] == {"threads": b"\x01"}


def test_full_delegation_of_every_op():
    model, inputs = Model().eval(), _inputs()
    edge = to_edge(torch.export.export(model, inputs))
    ops = {str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    buffer = edge.to_backend(OpsPartitioner(ops)).to_executorch().buffer
    plan = _plan(buffer)
    assert len(plan.delegates) == 1 and plan.operators == []
    assert_matches(torchedge_run(buffer, inputs), torch_outputs(model, inputs))


def test_whole_program_to_backend():
    model, inputs = Model().eval(), _inputs()
    edge = to_edge(torch.export.export(model, inputs)).exported_program()
    lowered = to_backend("NestedPteBackend", edge, [])
    assert lowered.backend_id == "NestedPteBackend" and lowered.processed_bytes[4:8] == b"ET12"


def test_missing_backend_is_named_by_both_runtimes():
    model, inputs = Model().eval(), _inputs()
    buffer = (
        to_edge(torch.export.export(model, inputs))
        .to_backend(OpsPartitioner({"aten.relu.default"}))
        .to_executorch()
        .buffer
    )
    from torchedge.runtime import backend as backend_registry

    saved = backend_registry._BACKENDS.pop("NestedPteBackend")
    try:
        with pytest.raises(BackendMissingError, match="NestedPteBackend"):
            Runtime.get().load_program(buffer).load_method("forward")
    finally:
        backend_registry._BACKENDS["NestedPteBackend"] = saved
    with pytest.raises(Exception) as info:  # the real ExecuTorch loads the file, then misses the backend
        executorch_run(buffer, inputs)
    assert "NestedPteBackend" in str(info.value) or "0x" in str(info.value)


def test_delegate_to_a_backend_the_target_lacks_fails_to_compile():
    from torchedge.errors import ExportError
    from torchedge.exir import ExecutorchBackendConfig

    model, inputs = Model().eval(), _inputs()
    edge = to_edge(torch.export.export(model, inputs)).to_backend(OpsPartitioner({"aten.relu.default"}))
    with pytest.raises(ExportError, match="backend 'NestedPteBackend'"):
        edge.to_executorch(ExecutorchBackendConfig(backend_set=["XnnpackBackend"]))
    edge.to_executorch(ExecutorchBackendConfig(backend_set=["NestedPteBackend"]))
