"""Verifiers and user passes: valid passes run in order, a pass that breaks the IR is named."""

import pytest
import torch

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_run
from torchedge.exir import EdgeCompileConfig, to_edge
from torchedge.exir.passes import PassBase, PassResult
from torchedge.exir.verification import IRVerificationError


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) + torch.relu(x)


def _edge(config=None):
    return to_edge(torch.export.export(Model().eval(), (torch.randn(3, 4),)), compile_config=config)


class ReluToTanh(PassBase):
    """A user pass: swap every relu for tanh."""

    def call(self, gm):
        modified = False
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target == torch.ops.aten.relu.default:
                node.target = torch.ops.aten.tanh.default
                modified = True
        return PassResult(gm, modified)


def add_one(gm):
    """A plain-callable pass that runs after ReluToTanh: x + 1 on the output."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    result = output.args[0][0]
    with gm.graph.inserting_before(output):
        one = gm.graph.call_function(torch.ops.aten.add.Scalar, (result, 1.0))
    one.meta["val"] = result.meta["val"]
    output.args = ((one,),)
    return gm


def test_user_passes_run_in_order_and_compile():
    edge = _edge().transform([ReluToTanh(), add_one])
    program = edge.to_executorch()
    x = torch.randn(3, 4)
    expected = [(torch.sigmoid(x) + torch.tanh(x) + 1).numpy()]
    assert_matches(torchedge_run(program.buffer, [x]), expected)
    assert_matches(executorch_run(program.buffer, [x]), expected)


class BreaksTheIR(PassBase):
    """Puts a Python scalar where aten.add.Tensor needs a tensor."""

    def call(self, gm):
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target == torch.ops.aten.add.Tensor:
                node.args = (node.args[0], 2.0)
        return PassResult(gm, True)


def test_invalid_pass_is_caught_with_a_clear_message():
    with pytest.raises(IRVerificationError) as info:
        _edge().transform([BreaksTheIR()])
    message = str(info.value)
    assert "after pass BreaksTheIR" in message
    assert "Python scalar 2.0" in message and "aten::add.Tensor" in message
    assert "test_verification.py" in message  # the user's source line of the add


def test_verification_can_be_disabled():
    _edge(EdgeCompileConfig(_check_ir_validity=False)).transform([BreaksTheIR()])


def test_python_scalars_become_tensors_in_edge():
    class AddsEps(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.add.Tensor(x, 1e-6)

    x = torch.randn(5)
    ep = to_edge(torch.export.export(AddsEps(), (x,))).exported_program()
    for node in ep.graph.nodes:
        if node.target == torch.ops.aten.add.Tensor:
            assert all(isinstance(a, torch.fx.Node) for a in node.args)
    program = to_edge(torch.export.export(AddsEps(), (x,))).to_executorch()
    assert_matches(torchedge_run(program.buffer, [x]), torch_outputs(AddsEps(), (x,)))


class MakesSigmoidReturnInt(PassBase):
    """Claims sigmoid returns int32: no dtype constraint of sigmoid allows that."""

    def call(self, gm):
        for node in gm.graph.nodes:
            if node.target == torch.ops.aten.sigmoid.default:
                node.meta["val"] = node.meta["val"].to(torch.int32)
        return PassResult(gm, True)


def test_dtype_constraint_violation_names_dtypes_found_and_allowed():
    with pytest.raises(IRVerificationError) as info:
        _edge().transform([MakesSigmoidReturnInt()])
    message = str(info.value)
    assert "aten::sigmoid" in message and "Int" in message and "Float" in message
    assert "test_verification.py" in message


def test_backend_config_passes_run_before_lowering():
    from torchedge.exir import ExecutorchBackendConfig

    program = _edge().to_executorch(ExecutorchBackendConfig(passes=[ReluToTanh()]))
    ops = {o.name for o in program.program.execution_plan[0].operators}
    assert "aten::tanh" in ops and "aten::relu" not in ops
    x = torch.randn(3, 4)
    assert_matches(torchedge_run(program.buffer, [x]), [(torch.sigmoid(x) + torch.tanh(x)).numpy()])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x.to(torch.int64) + 0.5) * 2,  # int tensor + float scalar -> float result
        lambda x: torch.split(x, [1, 2], dim=0)[1] > 0.1,  # Tensor[] returns, then a comparison with a scalar
        lambda x: x.double() * 0.1,
    ],
    ids=["int_plus_float", "split_then_compare", "double_times_scalar"],
)
def test_valid_graphs_pass_the_verifier(fn):
    class Fn(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    x = torch.randn(3, 4) * 4
    program = to_edge(torch.export.export(Fn(), (x,))).to_executorch()
    assert_matches(torchedge_run(program.buffer, [x]), torch_outputs(Fn(), (x,)))
