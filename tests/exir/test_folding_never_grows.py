"""Constant folding never makes a program bigger: an operator whose folded result is larger
than what it reads (an ``expand`` of a weight) stays in the graph; folds that keep or shrink
the bytes (a transpose, a sum) still happen. Outputs equal eager either way."""

from __future__ import annotations

import torch
from torch.export import Dim

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_run
from torchedge.exir import EdgeCompileConfig, to_edge

aten = torch.ops.aten


def _edge_graph(model, inputs, dynamic_shapes=None):
    ep = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    return to_edge(ep).exported_program().graph


def _targets(graph) -> set:
    return {n.target for n in graph.nodes if n.op == "call_function"}


def _folded(graph) -> list:
    return [n for n in graph.nodes if n.op == "placeholder" and n.name.startswith("_folded_")]


class ExpandsWeight(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 8))

    def forward(self, x):
        return x * self.w.expand(16, 4, 8)  # stored expanded it would take 16 times the weight


class TransposesAndSums(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 8))

    def forward(self, x):
        return x @ self.w.t() + self.w.sum(1)


def test_an_expand_of_a_weight_is_not_folded():
    model, inputs = ExpandsWeight().eval(), (torch.randn(16, 4, 8),)
    graph = _edge_graph(model, inputs)
    assert aten.expand_copy.default in _targets(graph)
    assert not _folded(graph)
    program = to_edge(torch.export.export(model, inputs)).to_executorch()
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs))


def test_a_transpose_and_a_sum_of_a_weight_are_still_folded():
    model, inputs = TransposesAndSums().eval(), (torch.randn(2, 8),)
    graph = _edge_graph(model, inputs)
    assert not {aten.permute_copy.default, aten.sum.dim_IntList} & _targets(graph)
    assert sorted(tuple(n.meta["val"].shape) for n in _folded(graph)) == [(4,), (8, 4)]
    assert not [n for n in graph.nodes if n.op == "placeholder" and n.name == "p_w"]  # the weight itself is gone
    program = to_edge(torch.export.export(model, inputs)).to_executorch()
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs))


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attention = torch.nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, q):
        return self.attention(q, q, q, need_weights=False)[0]


def test_attention_with_a_dynamic_batch_is_no_bigger_folded():
    """The input projection's matrix product broadcasts its [32, 96] weight over the sequence
    (an ``expand`` to [64, 32, 96]): folding stored that, ten times the unfolded program."""
    from executorch.exir import to_edge as et_to_edge

    model, example = Attention().eval(), (torch.randn(2, 64, 32),)
    ep = torch.export.export(model, example, dynamic_shapes=({0: Dim("batch", max=8)},))
    folded = to_edge(ep).to_executorch()
    unfolded = to_edge(ep, compile_config=EdgeCompileConfig(fold_constants=False)).to_executorch()
    size, size_unfolded, size_executorch = (len(p.buffer) for p in (folded, unfolded, et_to_edge(ep).to_executorch()))
    assert size <= size_unfolded, f"folded {size} bytes, unfolded {size_unfolded}"
    assert size <= size_executorch * 1.02, f"torchedge {size} bytes, ExecuTorch {size_executorch}"
    for batch in (1, 3):
        inputs = (torch.randn(batch, 64, 32),)
        expected = torch_outputs(model, inputs)
        assert_matches(torchedge_run(folded.buffer, inputs), expected)
        assert_matches(executorch_run(folded.buffer, inputs), expected)
