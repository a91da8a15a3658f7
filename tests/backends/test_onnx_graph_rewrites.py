"""The graph rewrites the ONNX Runtime partitioner makes before partitioning keep what the graph
computes: checked by running the rewritten graph module against the original on the same inputs."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from torchedge.backends.onnxruntime.common_values import merge_common_values  # noqa: E402
from torchedge.backends.onnxruntime.symbolic_sizes import infer_symbolic_sizes  # noqa: E402
from torchedge.exir import to_edge  # noqa: E402

aten = torch.ops.aten


class _Layers(torch.nn.Module):
    """Two "layers" that each copy the position into a counter of their own and index from it."""

    def forward(self, x, position, counter_a, counter_b):
        rows = []
        for counter in (counter_a, counter_b):
            start = aten.copy.default(counter, position)
            rows.append(torch.arange(x.shape[1]) + start)
        return rows[0] * 2, rows[1] * 3, x.view(1, x.shape[1], -1, 4).sum(-1)


def _graph(module):
    x = torch.randn(1, 5, 8)
    dims = {"x": {1: torch.export.Dim("s", min=2, max=16)}, "position": None, "counter_a": None, "counter_b": None}
    ep = torch.export.export(module, (x, torch.tensor(3), torch.tensor(0), torch.tensor(0)), dynamic_shapes=dims)
    return to_edge(ep).exported_program().module()  # the Edge graph the partitioner sees


def _calls(gm, target):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


def test_copies_and_repeats_are_computed_once_with_equal_results():
    gm = _graph(_Layers())
    inputs = (torch.randn(1, 7, 8), torch.tensor(11), torch.tensor(-4), torch.tensor(9))
    expected = gm(*inputs)
    assert len(_calls(gm, aten.arange.start_step)) == 2
    assert merge_common_values(gm)
    assert len(_calls(gm, aten.arange.start_step)) == 1 and not _calls(gm, aten.copy.default)
    for got, want in zip(gm(*inputs), expected):
        assert torch.equal(got, want)


def test_a_view_with_a_symbolic_size_and_minus_one_gets_integer_sizes():
    gm = _graph(_Layers())
    inputs = (torch.randn(1, 9, 8), torch.tensor(0), torch.tensor(0), torch.tensor(0))
    expected = gm(*inputs)
    infer_symbolic_sizes(gm)
    (view,) = _calls(gm, aten.view_copy.default)
    assert all(isinstance(s, int) for s in view.args[1])
    for got, want in zip(gm(*inputs), expected):
        assert torch.equal(got, want)
