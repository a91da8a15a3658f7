"""A rule whose matcher is a function (`Rule(matcher=...)`, the escape for what a pattern cannot
write) runs through both adapters as a pattern rule does: written once, in one place, it fuses
at load with the bits of the steps and ahead of time with eager's results."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from tests.conftest import assert_matches, torch_outputs, torchedge_compile
from torchedge.exir.config import ExecutorchBackendConfig
from torchedge.exir.passes import kernel_fusion
from torchedge.exir.passes.kernel_fusion import FuseKernelsPass
from torchedge.fusion import Match, Rule, options
from torchedge.runtime import Runtime


def _relu_of_product(graph, node) -> Match | None:
    """``relu(mm(input, weight))``, walked by hand through the graph's questions."""
    product = graph.producer(graph.argument(node, "self"))
    if graph.operator(node) != "aten::relu" or product is None or graph.operator(product) != "aten::mm":
        return None
    if graph.readers(product) != (node,):
        return None
    refs = {"input": graph.argument(product, "self"), "weight": graph.argument(product, "mat2")}
    return Match(graph, root=node, refs=refs, group=[node, product])


RELU_MM = Rule(
    "relu_mm",
    "exact",
    "``relu(mm(x, w))`` as ``torchedge_fused::linear_act``, matched by a function.",
    "torchedge_fused::linear_act",
    arguments=lambda found: {"input": found["input"], "weight": found["weight"], "bias": None, "activation": "relu"},
    matcher=_relu_of_product,
    roots=("aten::relu",),
)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 24, bias=False), nn.ReLU()).eval(), (torch.randn(5, 16),)


def test_a_matcher_rule_fuses_at_load_with_the_bits_of_the_steps(monkeypatch):
    model, inputs = _model()
    program = Runtime.get().load_program(torchedge_compile(model, inputs).buffer)
    monkeypatch.setattr(options, "RULES", (RELU_MM,))
    fused, plain = program.load_method("forward"), program.load_method("forward", fuse=False)
    assert "torchedge_fused::linear_act.out (relu_mm, fused at load)" in [s.label for s in fused._steps]
    arrays = [t.numpy() for t in inputs]
    np.testing.assert_array_equal(fused.execute(arrays)[0], plain.execute(arrays)[0])


def test_a_matcher_rule_fuses_ahead_of_time(monkeypatch):
    model, inputs = _model()
    monkeypatch.setattr(kernel_fusion, "RULES", (RELU_MM,))
    program = torchedge_compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    targets = [str(n.target) for n in program.graph_module().graph.nodes if n.op == "call_function"]
    assert any("linear_act" in t for t in targets) and not any("relu" in t for t in targets)
    outputs = Runtime.get().load_program(program.buffer).load_method("forward").execute([t.numpy() for t in inputs])
    assert_matches(outputs, torch_outputs(model, inputs), tol=1e-5)
