"""Grouped-query attention reads its key and value heads without repeating them: the rewrite
before partitioning keeps what the graph computes (checked against the graph before the rewrite
and against PyTorch eager on the same inputs), and a delegate's output is never sized by an
expression of a symbol."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.backends.onnxruntime.grouped_attention import group_attention_heads  # noqa: E402
from torchedge.backends.onnxruntime.symbolic_sizes import infer_symbolic_sizes  # noqa: E402
from torchedge.exir import to_edge, to_edge_transform_and_lower  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402

aten = torch.ops.aten
HEADS, KV_HEADS, DIM, CACHE = 6, 2, 8, 10


class _Attention(torch.nn.Module):
    """transformers' eager attention: the cached key and value heads repeated to the query heads."""

    def forward(self, q, k, v):
        def repeat(x):
            b, n, t, d = x.shape
            return x[:, :, None].expand(b, n, HEADS // KV_HEADS, t, d).reshape(b, HEADS, t, d)

        scores = torch.matmul(q * DIM**-0.25, repeat(k).transpose(2, 3) * DIM**-0.25)
        return torch.matmul(scores.softmax(-1), repeat(v))


def _inputs(rows):
    torch.manual_seed(rows)
    return torch.randn(1, HEADS, rows, DIM), torch.randn(1, KV_HEADS, CACHE, DIM), torch.randn(1, KV_HEADS, CACHE, DIM)


def _edge():
    dims = ({2: torch.export.Dim("s", min=1, max=CACHE)}, None, None)
    return to_edge(torch.export.export(_Attention(), _inputs(4), dynamic_shapes=dims))


def _calls(gm, target):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


def test_the_heads_are_read_once_with_the_results_of_the_repeat_and_of_eager():
    gm = _edge().exported_program().module()
    infer_symbolic_sizes(gm)
    before = {rows: gm(*_inputs(rows)) for rows in (1, 4, 7)}
    assert len(_calls(gm, aten.expand_copy.default)) >= 2
    assert group_attention_heads(gm)
    assert len(_calls(gm, aten.bmm.default)) == 2
    repeats = [n for n in _calls(gm, aten.expand_copy.default) if n.meta["val"].dim() == 5]
    assert repeats == []  # no key or value head is copied to the query heads
    for rows, want in before.items():
        got = gm(*_inputs(rows))
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)  # same dot products, maybe another blocking
        torch.testing.assert_close(got, _Attention()(*_inputs(rows)), rtol=1e-5, atol=1e-5)


def test_the_grouped_attention_runs_delegated_with_eager_results():
    program = _edge().to_backend(OnnxRuntimePartitioner()).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for rows in (1, 4, 7):
        inputs = _inputs(rows)
        (out,) = method.execute([t.numpy() for t in inputs])
        torch.testing.assert_close(torch.from_numpy(out), _Attention()(*inputs), rtol=1e-5, atol=1e-5)


class _GroupedRows(torch.nn.Module):
    """A view that merges a symbolic size (``[2, 2*s, 4]``) read outside the delegate that makes it."""

    def forward(self, x):
        y = (x * 2).reshape(2, -1, 4)
        return torch.remainder(y, 3)  # an operator the ONNX lowering does not translate


def test_a_delegate_output_sized_by_an_expression_of_a_symbol_stays_portable():
    x = torch.randn(4, 3, 4)
    ep = torch.export.export(_GroupedRows(), (x,), dynamic_shapes=({1: torch.export.Dim("s", min=2, max=8)},))
    program = to_edge_transform_and_lower(ep, partitioner=[OnnxRuntimePartitioner()]).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for rows in (2, 5):
        x = torch.randn(4, rows, 4)
        (out,) = method.execute([x.numpy()])
        torch.testing.assert_close(torch.from_numpy(out), _GroupedRows()(x))
