"""Rotary position embedding as ONNX Runtime's RotaryEmbedding: the partitioner's rewrite applies
where the cos and sin tables have equal halves by construction, and the delegated program's
outputs equal PyTorch eager's; tables of any other making keep the node-by-node translation."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.backends.onnxruntime.rotary import NAMESPACE, use_rotary_kernel  # noqa: E402
from torchedge.backends.onnxruntime.runtime import OnnxRuntimeDelegate  # noqa: E402
from torchedge.exir import to_edge, to_edge_transform_and_lower  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class _Rotary(torch.nn.Module):
    """transformers' Llama rotary embedding of query and key heads; ``tables`` says how the cos
    and sin tables are made: from ``cat(f, f)`` (equal halves) or from all of ``f`` (unequal)."""

    def __init__(self, tables="duplicated"):
        super().__init__()
        self.tables = tables
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 16, 2).float() / 16)))

    def forward(self, q, k, positions):
        freqs = positions[:, :, None].float() * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1) if self.tables == "duplicated" else torch.cat([freqs, freqs * 2], -1)
        cos, sin = (emb.cos() * 1.0).unsqueeze(1), (emb.sin() * 1.0).unsqueeze(1)
        return torch.cat([q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin], dim=1)


def _inputs(s):
    torch.manual_seed(s)
    return torch.randn(1, 4, s, 16), torch.randn(1, 2, s, 16), torch.arange(3, 3 + s)[None]


def _edge(module):
    s = torch.export.Dim("s", min=1, max=16)
    dims = {"q": {2: s}, "k": {2: s}, "positions": {1: s}}
    return torch.export.export(module, _inputs(5), dynamic_shapes=dims)


def _rotaries(gm):
    return [n for n in gm.graph.nodes if getattr(n.target, "namespace", None) == NAMESPACE]


def test_tables_with_equal_halves_become_one_rotary_call_each_with_eager_results():
    module = _Rotary()
    gm = to_edge(_edge(module)).exported_program().graph_module
    assert use_rotary_kernel(gm) and len(_rotaries(gm)) == 2
    program = to_edge_transform_and_lower(_edge(module), partitioner=[OnnxRuntimePartitioner()]).to_executorch()
    pte = deserialize_pte(program.buffer)
    (plan,) = pte.program.execution_plan
    lines = [line for d in plan.delegates for line in OnnxRuntimeDelegate().describe(pte.delegate_data(d))]
    assert sum(int(line.split("x")[0]) for line in lines if line.endswith(" x RotaryEmbedding")) == 2
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for s in (1, 5, 9):
        inputs = _inputs(s)
        (got,) = method.execute([t.numpy() for t in inputs])
        np.testing.assert_allclose(got, module(*inputs).numpy(), rtol=1e-5, atol=1e-6)


def test_tables_whose_halves_differ_keep_the_node_by_node_translation():
    gm = to_edge(_edge(_Rotary(tables="different"))).exported_program().graph_module
    assert not use_rotary_kernel(gm) and not _rotaries(gm)
