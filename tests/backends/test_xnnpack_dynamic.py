"""ExecuTorch's XNNPACK programs with dynamic shapes run on torchedge at every size in range.

Models are exported with `Dim` ranges and lowered by the real ExecuTorch with its
`XnnpackPartitioner`; the payload's values carry their upper-bound dims. torchedge's interpreter
takes the call's input shapes, follows them through the nodes and hands back outputs of the shape
they have. The delegate's outputs are dynamic tensors of the method: the runtime resizes them to
what `XnnpackBackend.execute` returns.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

import torch.nn.functional as F  # noqa: E402
from torch.export import Dim  # noqa: E402

from tests.conftest import executorch_run  # noqa: E402
from torchedge.backends.xnnpack.header import split_payload  # noqa: E402
from torchedge.backends.xnnpack.runtime import XnnpackBackend  # noqa: E402
from torchedge.errors import KernelError  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.runtime.named_data import NamedDataMap  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402


def _lower(model, inputs, dynamic_shapes) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    exported = torch.export.export(model.eval(), tuple(inputs), dynamic_shapes=dynamic_shapes)
    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _run(buffer, inputs):
    method = Runtime.get().load_program(buffer).load_method("forward")
    return method.execute([np.asarray(i) for i in inputs])


def _close(got, want, tol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), w.detach().numpy()
        assert g.shape == w.shape, f"{g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * max(1.0, float(np.abs(w).max())))


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(8, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.sigmoid(self.a(x))))) * 2.0 + x[..., :4]


class _Attention(torch.nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv, self.out, self.norm = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d), torch.nn.LayerNorm(d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        return self.out((scores @ v).transpose(1, 2).reshape(b, t, d)) + x


@functools.cache
def _mlp():
    torch.manual_seed(0)
    model = _Mlp().eval()
    return model, _lower(model, (torch.randn(5, 8),), ({0: Dim("batch", min=1, max=16)},))


@functools.cache
def _attention():
    torch.manual_seed(0)
    model = _Attention().eval()
    return model, _lower(model, (torch.randn(1, 12, 32),), ({1: Dim("seq", min=2, max=32)},))


@pytest.mark.parametrize("batch", [1, 3, 5, 16])
def test_linear_stack_with_dynamic_batch(batch):
    model, buffer = _mlp()
    x = torch.randn(batch, 8)
    _close(_run(buffer, [x]), [model(x)])


@pytest.mark.parametrize("seq", [2, 7, 12, 32])
def test_attention_block_with_dynamic_sequence(seq):
    model, buffer = _attention()
    x = torch.randn(1, seq, 32)
    _close(_run(buffer, [x]), [model(x)])
    _close(executorch_run(buffer, [x.numpy()]), [model(x)])


def test_delegate_hands_back_outputs_of_another_shape():
    """At the delegate call: inputs below the upper bound, outputs at it (as planned)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    buffer = _lower(model, (torch.randn(4, 8),), ({0: Dim("batch", min=1, max=16)},))
    pte = deserialize_pte(buffer)
    [delegate] = pte.program.execution_plan[0].delegates
    named = NamedDataMap([("program", [e.key for e in pte.program.named_data or []], pte.named_data)])
    backend = XnnpackBackend()
    plan = backend.init(memoryview(pte.delegate_data(delegate)), {}, named)
    out = np.zeros(plan.outputs[0].shape, np.float32)
    for batch in (16, 2, 9, 2):
        x = torch.randn(batch, 8)
        resized = backend.execute(plan, [x.numpy(), out])
        got = resized[1] if batch != 16 else out
        np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert len(plan.variants) == 2  # one plan per input shape seen, the static one aside
    with pytest.raises(KernelError, match="another rank"):
        backend.execute(plan, [np.zeros((2, 2, 8), np.float32), out])
    assert split_payload(pte.delegate_data(delegate))  # the payload itself is untouched


class _Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, stride=2, groups=8)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = F.max_pool2d(torch.relu(self.conv(x)), 2)
        y = F.avg_pool2d(self.depthwise(y), 2)
        return self.head(y.mean(dim=(2, 3))), torch.cat([y, y * 2], 1)


@pytest.mark.parametrize("shape", [(1, 3, 32, 32), (3, 3, 16, 24), (8, 3, 64, 64)])
def test_convolutions_with_dynamic_batch_and_image_size(shape):
    """Convolutions, pooling, mean and concatenation follow the batch and the image's H and W."""
    model, buffer = _cnn()
    x = torch.randn(*shape)
    _close(_run(buffer, [x]), model(x))


@functools.cache
def _cnn():
    torch.manual_seed(0)
    model = _Cnn().eval()
    h, w = Dim("h", min=4, max=16), Dim("w", min=4, max=16)
    return model, _lower(model, (torch.randn(2, 3, 32, 32),), ({0: Dim("batch", min=1, max=8), 2: 4 * h, 3: 4 * w},))


def test_dynamically_quantized_int4_linears_with_dynamic_tokens():
    """torchao's int8 dynamic activations with int4 group-wise weights (an LLM's linears): the
    per-row activation parameters follow the number of rows; equal to ExecuTorch's XNNPACK."""
    quant_api = pytest.importorskip("torchao.quantization.quant_api")
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8, bias=False)).eval()
    config = quant_api.Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32))
    quant_api.quantize_(model, config)
    buffer = _lower(model, (torch.randn(1, 6, 64),), ({1: Dim("tokens", min=1, max=32)},))
    for tokens in (1, 3, 6, 32):
        x = torch.randn(1, tokens, 64)
        [got], [want] = _run(buffer, [x]), executorch_run(buffer, [x.numpy()])
        assert got.shape == want.shape == (1, tokens, 8)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(
    os.environ.get("TORCHEDGE_XNNPACK_MODELS") != "all", reason="lowering takes long: set TORCHEDGE_XNNPACK_MODELS=all"
)
def test_tiny_llama_with_dynamic_prompt_length():
    tf = pytest.importorskip("transformers")
    from torchedge.models.zoo import _Logits

    config = tf.LlamaConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=256,
        max_position_embeddings=128,
        use_cache=False,
    )
    torch.manual_seed(0)
    model = _Logits(tf.LlamaForCausalLM(config).eval(), use_cache=False).eval()
    buffer = _lower(model, (torch.randint(0, 256, (1, 16)),), ({1: Dim("seq", min=2, max=64)},))
    for seq in (2, 5, 16, 64):
        ids = torch.randint(0, 256, (1, seq))
        _close(_run(buffer, [ids]), [model(ids)], 1e-4)
