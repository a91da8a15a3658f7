"""Operators that used to split real models into several ONNX Runtime delegates.

``index.Tensor`` with several index tensors (attention masks), ``flip``, ``log1p``,
``as_strided_copy``, ``native_group_norm``, ``upsample_nearest2d.vec`` and ``avg_pool2d`` with
``ceil_mode``: each is delegated, runs on the torchedge runtime and matches PyTorch eager
(exactly where the lowering only moves data); a model using them all, and a transformers
model with a padding mask, become one delegate; what ONNX cannot express stays portable.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from tests.conftest import torch_outputs, torchedge_run  # noqa: E402
from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.backends.onnxruntime.lowering import is_supported  # noqa: E402
from torchedge.exir import to_edge, to_edge_transform_and_lower  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

_GEN = torch.Generator().manual_seed(0)


def randn(*shape, dtype=torch.float32):
    return torch.randn(shape, generator=_GEN).to(dtype)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _module(module_or_fn) -> nn.Module:
    return (module_or_fn if isinstance(module_or_fn, nn.Module) else Fn(module_or_fn)).eval()


def _delegated(module, inputs):
    """The program lowered with the ONNX Runtime partitioner, and its execution plan."""
    exported = torch.export.export(_module(module), tuple(inputs))
    program = to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner(1)]).to_executorch()
    return program, deserialize_pte(program.buffer).program.execution_plan[0]


def _assert_one_delegate_matching_eager(module, inputs, rtol=1e-6, atol=1e-6):
    program, plan = _delegated(module, inputs)
    assert [d.id for d in plan.delegates] == ["OnnxRuntimeBackend"]
    assert plan.operators == [], f"not delegated: {[f'{o.name}.{o.overload}' for o in plan.operators]}"
    got = torchedge_run(program.buffer, inputs)
    want = torch_outputs(_module(module), inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        assert np.array_equal(np.signbit(g[w == 0]), np.signbit(w[w == 0])), "signed zeros differ"


_ROWS = torch.tensor([[0], [2]])
CASES = {  # id -> (module or function, inputs, rtol)
    "index_adjacent": (lambda x, i, j: x[:, i, j], (randn(2, 3, 4, 5), _ROWS, torch.tensor([1, -1, 3])), 0),
    "index_separated": (
        lambda x, i, j: x[i, :, j] * 2,
        (randn(2, 3, 4, 5), torch.tensor([1, 0, -2]), torch.tensor([2, 3, 0])),
        0,
    ),
    "index_three_int32": (
        lambda x, i, j, k: x[i, j, k],
        (
            randn(3, 4, 5),
            torch.tensor([2, -3], dtype=torch.int32),
            torch.tensor([[3], [0]], dtype=torch.int32),
            torch.tensor([4, -5], dtype=torch.int32),
        ),
        0,
    ),
    "index_mask": (
        lambda m, b, k: m[b, k],
        (torch.rand(2, 8, generator=_GEN) > 0.5, torch.arange(2).view(2, 1, 1, 1), torch.arange(8).view(1, 1, 1, 8)),
        0,
    ),
    "flip": (lambda x: torch.flip(x * 3, [1, -1]), (randn(2, 3, 4),), 0),
    "flip_int": (lambda x: torch.flip(x, [0]) + 1, (torch.arange(12).view(3, 4),), 0),
    "log1p": (
        torch.log1p,
        (
            torch.tensor(
                [0.0, -0.0, 1e-10, -1e-10, 3e-8, -0.5, -1.0, -2.0, 3e38, float("inf"), -float("inf"), float("nan")]
            ),
        ),
        2e-7,
    ),
    "log1p_range": (
        torch.log1p,
        ((torch.rand(4096, generator=_GEN) - 0.5) * 10.0 ** torch.randint(-8, 4, (4096,), generator=_GEN),),
        4e-7,
    ),
    "log1p_float64": (torch.log1p, (torch.rand(1000, generator=_GEN, dtype=torch.float64) * 4 - 0.99,), 1e-15),
    "as_strided": (lambda x: torch.as_strided(x + 1, (3, 4), (2, 1), 1), (randn(20),), 0),
    "as_strided_3d": (lambda x: torch.as_strided(x * 2, (2, 3, 2), (6, 1, 3)), (randn(4, 3),), 0),
    "group_norm": (nn.GroupNorm(2, 6), (randn(2, 6, 5, 7) * 3 + 1,), 1e-5),
    "group_norm_3d_no_affine": (nn.GroupNorm(3, 6, affine=False), (randn(2, 6, 10),), 1e-5),
    "group_norm_float64": (nn.GroupNorm(2, 4).double(), (randn(2, 4, 3, 3, dtype=torch.float64),), 1e-12),
    "upsample_nearest_x2": (nn.Upsample(scale_factor=2), (randn(1, 2, 3, 5),), 0),
    "upsample_nearest_size": (nn.Upsample(size=(7, 11)), (randn(1, 2, 3, 5),), 0),
    "upsample_nearest_fraction": (lambda x: F.interpolate(x, scale_factor=1.7), (randn(1, 2, 5, 6),), 0),
    "upsample_nearest_down": (lambda x: F.interpolate(x, size=(2, 3)), (randn(1, 2, 5, 7),), 0),
    "avg_pool_ceil": (nn.AvgPool2d(3, 2, 1, ceil_mode=True), (randn(1, 3, 6, 7),), 1e-6),
    "avg_pool_ceil_no_pad_count": (
        nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
        (randn(1, 3, 6, 7),),
        1e-6,
    ),
    "avg_pool_ceil_drops_window": (nn.AvgPool2d(2, 2, 1, ceil_mode=True), (randn(1, 3, 5, 5),), 1e-6),
    "avg_pool_efficientnet": (nn.AvgPool2d(1280, ceil_mode=True), (randn(1, 16, 5, 5),), 1e-6),
    "avg_pool_stride_above_kernel": (nn.AvgPool2d(2, 3, ceil_mode=True), (randn(1, 2, 7, 8),), 1e-6),
}


@pytest.mark.parametrize("case", CASES)
def test_operator_is_delegated_and_matches_eager(case):
    module, inputs, rtol = CASES[case]
    _assert_one_delegate_matching_eager(module, inputs, rtol=rtol, atol=rtol)


class Covered(nn.Module):
    """Every newly lowered operator in one graph."""

    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(2, 4)
        self.up = nn.Upsample(scale_factor=2)
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)

    def forward(self, x, mask):
        y = self.pool(self.up(self.norm(x)))  # (2, 4, 5, 6) -> (2, 4, 10, 12) -> (2, 4, 6, 7)
        y = torch.flip(torch.log1p(y.abs()), [-1])
        keep = mask[torch.arange(2).view(2, 1, 1, 1), torch.arange(7).view(1, 1, 1, 7)]
        y = torch.where(keep, y, -1.0)
        return torch.as_strided(y + 0, (2, 4, 3, 7), (168, 42, 14, 1))


def test_model_using_them_all_is_one_delegate():
    inputs = (randn(2, 4, 5, 6), torch.rand(2, 7, generator=_GEN) > 0.3)
    _assert_one_delegate_matching_eager(Covered(), inputs, rtol=1e-5, atol=1e-5)


def test_transformers_model_with_a_padding_mask_is_one_delegate():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = transformers.LlamaModel(config).eval()
    tokens, mask = torch.randint(0, 64, (2, 8), generator=_GEN), torch.ones(2, 8, dtype=torch.long)
    mask[0, :3] = 0
    wrapped = Fn(lambda ids, m: model(input_ids=ids, attention_mask=m).last_hidden_state)
    _assert_one_delegate_matching_eager(wrapped, (tokens, mask), rtol=1e-4, atol=1e-4)


REFUSED = {  # id -> (function, inputs, the operator that stays portable)
    "avg_pool_divisor_override": (
        lambda x: F.avg_pool2d(x, 2, ceil_mode=True, divisor_override=3),
        (randn(1, 2, 5, 5),),
        "aten.avg_pool2d.default",
    ),
    "group_norm_float16": (
        lambda x: F.group_norm(x, 2),
        (randn(1, 4, 3, dtype=torch.float16),),
        "aten.native_group_norm.default",
    ),
    "log1p_float16": (torch.log1p, (randn(4, dtype=torch.float16),), "aten.log1p.default"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_what_onnx_cannot_express_stays_portable(case):
    fn, inputs, target = REFUSED[case]
    ep = to_edge(torch.export.export(_module(fn), inputs)).exported_program()
    nodes = [n for n in ep.graph.nodes if str(n.target) == target]
    assert nodes and not any(is_supported(n) for n in nodes)
    program, _ = _delegated(fn, inputs)
    np.testing.assert_allclose(
        torchedge_run(program.buffer, inputs)[0], torch_outputs(_module(fn), inputs)[0], rtol=1e-3, atol=1e-3
    )


def test_boolean_mask_index_is_refused():
    """``x[mask]`` selects as many elements as the mask holds: not a static shape."""
    ep = to_edge(
        torch.export.export(Fn(lambda x, i, j: x[i, j]), (randn(3, 4), torch.tensor([0, 2]), torch.tensor([1, 3])))
    ).exported_program()
    (node,) = [n for n in ep.graph.nodes if str(n.target) == "aten.index.Tensor"]
    index = node.args[1][1]
    index.meta["val"] = index.meta["val"].to(torch.bool)  # a boolean index in the same place
    assert not is_supported(node)
