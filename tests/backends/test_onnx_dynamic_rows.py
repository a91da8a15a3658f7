"""Graphs whose token dimension is symbolic lower to ONNX Runtime whole: norms, rotary halves,
attention over a static cache, MLPs. Reference: PyTorch eager on the same module, at several
token counts of one exported program."""

import operator

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.exir.ir import executorch_call_delegate  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402

HEADS, KV_HEADS, HEAD_DIM, CACHE = 4, 2, 8, 6
WIDTH = HEADS * HEAD_DIM


class Block(torch.nn.Module):
    """RMS norm, projections, rotary halves, grouped-query attention over a static cache (masked
    with full_like / where), a gated MLP and residuals: the operators of a decoder layer."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.Parameter(torch.rand(WIDTH) + 0.5)
        self.q = torch.nn.Linear(WIDTH, WIDTH, bias=False)
        self.o = torch.nn.Linear(WIDTH, WIDTH, bias=False)
        self.up = torch.nn.Linear(WIDTH, 2 * WIDTH, bias=False)
        self.down = torch.nn.Linear(2 * WIDTH, WIDTH, bias=False)
        self.register_buffer("keys", torch.randn(1, KV_HEADS, CACHE, HEAD_DIM))

    def forward(self, x):
        t = x.shape[1]
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm
        q = self.q(h).view(1, t, HEADS, HEAD_DIM).transpose(1, 2)
        q = q * 0.5 + torch.cat((-q[..., HEAD_DIM // 2 :], q[..., : HEAD_DIM // 2]), dim=-1)
        k = self.keys.unsqueeze(2).expand(1, KV_HEADS, HEADS // KV_HEADS, CACHE, HEAD_DIM)
        k = k.reshape(1, HEADS, CACHE, HEAD_DIM)
        scores = q @ k.transpose(2, 3)
        masked = torch.where(scores > 0.5, torch.full_like(scores, -1e4), scores)
        attention = (torch.softmax(masked, dim=-1) @ k).transpose(1, 2).reshape(1, t, WIDTH)
        x = x + self.o(attention)
        return x + self.down(torch.nn.functional.silu(self.up(x)) * self.up(x))


def _lowered(model, example):
    dims = ({1: torch.export.Dim("t", max=CACHE)},)
    ep = torch.export.export(model, (example,), dynamic_shapes=dims)
    return to_edge_transform_and_lower(ep, partitioner=[OnnxRuntimePartitioner()])


def _outside_delegates(edge) -> list[str]:
    graph = edge.exported_program().graph
    skipped = (executorch_call_delegate, operator.getitem, torch.ops.aten.sym_size.int)
    return [str(n.target) for n in graph.nodes if n.op == "call_function" and n.target not in skipped]


def test_a_decoder_block_with_a_symbolic_token_count_is_one_delegate():
    torch.manual_seed(0)
    model = Block().eval()
    edge = _lowered(model, torch.randn(1, 3, WIDTH))
    assert _outside_delegates(edge) == []
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    for t in (1, 5, 2):
        x = torch.randn(1, t, WIDTH)
        with torch.no_grad():
            expected = model(x).numpy()
        (out,) = method.execute([x.numpy()])
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


class Doubled(torch.nn.Module):
    """A concat along the token dimension makes a size (2t) no input has: it stays portable."""

    def forward(self, x):
        return torch.cat((x, x * 2), dim=1).sin()


def test_a_new_symbolic_size_stays_outside_the_delegate_and_runs_right():
    model = Doubled()
    edge = _lowered(model, torch.randn(1, 3, 4))
    assert "aten.cat.default" in _outside_delegates(edge)
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    for t in (1, 4):
        x = torch.randn(1, t, 4)
        (out,) = method.execute([x.numpy()])
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-6, atol=1e-6)


class Broadcast(torch.nn.Module):
    """An expand whose symbolic size is its input's (given as the ``sym_size`` of the input)."""

    def forward(self, x):
        return x.unsqueeze(1).expand(1, 3, x.shape[1], 4).cumsum(1).sum(1) * x


def test_an_expand_keeping_the_symbolic_size_joins_the_delegate():
    model = Broadcast()
    edge = _lowered(model, torch.randn(1, 3, 4))
    assert _outside_delegates(edge) == []
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    for t in (2, 5):
        x = torch.randn(1, t, 4)
        (out,) = method.execute([x.numpy()])
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5)
