"""`FuseKernelsPass`: operator chains become torchedge's fused kernels, opt-in, with eager's results."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from torch import nn

from tests.conftest import assert_matches, torch_outputs
from torchedge.errors import ExportError
from torchedge.exir import to_edge
from torchedge.exir.config import ExecutorchBackendConfig
from torchedge.exir.passes.kernel_fusion import FuseKernelsPass, fusion_passes
from torchedge.runtime import Runtime


class Attention(nn.Module):
    def __init__(self, causal=False, mask=False):
        super().__init__()
        self.qkv = nn.Linear(32, 96)
        self.causal, self.mask = causal, mask
        self.register_buffer("bias", torch.randn(1, 1, 10, 10))

    def forward(self, x):
        q, k, v = self.qkv(x).view(1, 10, 3, 4, 8).permute(2, 0, 3, 1, 4)
        y = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=self.bias if self.mask else None, is_causal=self.causal
        )
        return y.transpose(1, 2).reshape(1, 10, 32)


class HeadsAttention(nn.Module):
    """Attention as Hugging Face blocks write it: a projection each for q, k and v, moved to
    (batch, heads, tokens, width) by a view and a transpose, and moved back after."""

    def __init__(self, mask=False, shared_key=False):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)
        self.mask, self.shared_key = mask, shared_key
        self.register_buffer("bias", torch.randn(1, 4, 10, 10))

    def forward(self, x):
        q, k, v = (proj(x).view(1, 10, 4, 8).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.bias if self.mask else None)
        y = y.transpose(1, 2).reshape(1, 10, 32)
        return y + k.sum() if self.shared_key else y  # the moved keys read twice: no interleaved kernel


class ConvBlock(nn.Module):
    """TF-style "same" padding (more zeros after than before), conv, batch norm, relu6; then a plain
    conv with bias and relu, and one with nothing after it."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, stride=2, bias=False), nn.BatchNorm2d(8)
        self.depthwise, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8)
        self.conv3 = nn.Conv2d(8, 16, 1)
        self.conv4 = nn.Conv2d(16, 4, 3)
        for bn in (self.bn1, self.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.data.uniform_(0.5, 1.5)

    def forward(self, x):
        x = nn.functional.relu6(self.bn1(self.conv1(nn.functional.pad(x, (0, 1, 0, 1)))))
        x = nn.functional.relu6(self.bn2(self.depthwise(x)))
        return self.conv4(torch.relu(self.conv3(x)))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down, self.gate = nn.Linear(16, 64), nn.Linear(64, 16), nn.Linear(16, 64, bias=False)

    def forward(self, x):
        return self.down(nn.functional.gelu(self.up(x))) + self.down(nn.functional.silu(self.gate(x)))


def _compile(model, inputs, config=None):
    return to_edge(torch.export.export(model.eval(), inputs)).to_executorch(config)


def _fused_ops(program) -> collections.Counter:
    return collections.Counter(
        n.target.name()
        for n in program.graph_module().graph.nodes
        if n.op == "call_function" and "torchedge_fused" in str(n.target)
    )


def _run(program, inputs):
    return Runtime.get().load_program(program.buffer).load_method("forward").execute([i.numpy() for i in inputs])


CASES = {
    "attention": (lambda: Attention(), "torchedge_fused::attention.out", 1),
    "attention-causal": (lambda: Attention(causal=True), "torchedge_fused::attention.out", 1),
    "attention-mask": (lambda: Attention(mask=True), "torchedge_fused::attention.out", 1),
    "attention-interleaved": (lambda: HeadsAttention(), "torchedge_fused::attention_interleaved.out", 1),
    "attention-interleaved-mask": (lambda: HeadsAttention(mask=True), "torchedge_fused::attention_interleaved.out", 1),
    "attention-key-read-twice": (lambda: HeadsAttention(shared_key=True), "torchedge_fused::attention.out", 1),
    "conv": (lambda: ConvBlock(), "torchedge_fused::conv_bn_act.out", 3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fused_program_matches_eager(name):
    torch.manual_seed(0)
    factory, op, count = CASES[name]
    model = factory().eval()
    inputs = (torch.randn(1, 10, 32),) if name.startswith("attention") else (torch.randn(2, 3, 16, 16),)
    program = _compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    assert _fused_ops(program) == {op: count}
    assert_matches(_run(program, inputs), torch_outputs(model, inputs), tol=1e-5)


def test_linear_fusion_can_be_switched_off():
    torch.manual_seed(0)
    model, inputs = Mlp().eval(), (torch.randn(5, 16),)
    assert not _fused_ops(_compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass(linear=False)])))
    program = _compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    assert _fused_ops(program) == {"torchedge_fused::linear_act.out": 2}  # gelu, and silu as x * sigmoid(x)
    assert_matches(_run(program, inputs), torch_outputs(model, inputs), tol=1e-5)


def test_builtin_cnn_fuses_every_convolution():
    from torchedge.models import load_model

    model, inputs = load_model("cnn")
    program = _compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    assert _fused_ops(program) == {"torchedge_fused::conv_bn_act.out": 2}
    ops = {n.target for n in program.graph_module().graph.nodes if n.op == "call_function"}
    assert torch.ops.aten._native_batch_norm_legit_no_training.out not in ops and torch.ops.aten.relu.out not in ops
    assert_matches(_run(program, inputs), torch_outputs(model, inputs), tol=1e-5)


def test_default_programs_keep_executorch_operators():
    """Without the pass (the default), nothing is fused: programs stay loadable on ExecuTorch."""
    torch.manual_seed(0)
    assert not _fused_ops(_compile(ConvBlock(), (torch.randn(1, 3, 16, 16),)))
    config = ExecutorchBackendConfig()
    assert fusion_passes(config) == []
    config.fuse_kernels = True  # the flag `to_executorch` reads (a field of the config, when it has one)
    assert [type(p) for p in fusion_passes(config)] == [FuseKernelsPass]
    config.kernel_set = ["aten::convolution.out"]  # another runtime's kernels: never fused
    assert fusion_passes(config) == []


def test_fused_operator_missing_from_target_kernel_set_fails_by_name():
    from torchedge.kernels.registry import registered_operators

    torch.manual_seed(0)
    executorch_like = [op for op in registered_operators() if not op.startswith("torchedge_fused::")]
    config = ExecutorchBackendConfig(passes=[FuseKernelsPass()], kernel_set=executorch_like)
    with pytest.raises(ExportError, match="torchedge_fused::conv_bn_act.out"):
        _compile(ConvBlock(), (torch.randn(1, 3, 16, 16),), config)


def test_unfusable_chains_are_left_alone():
    """A convolution whose output is used twice keeps its relu apart (its batch norm folds into the
    weights before fusion)."""

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.bn(self.conv(x))
            return torch.relu(y) + y

    torch.manual_seed(0)
    model, inputs = Shared().eval(), (torch.randn(1, 3, 8, 8),)
    program = _compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    assert not _fused_ops(program)
    ops = {n.target for n in program.graph_module().graph.nodes if n.op == "call_function"}
    assert torch.ops.aten._native_batch_norm_legit_no_training.out not in ops and torch.ops.aten.relu.out in ops
    assert_matches(_run(program, inputs), torch_outputs(model, inputs), tol=1e-5)
    # float16 attention: PyTorch's math decomposition computes it in float32, and so does the fused kernel
    half, inputs = Attention().half().eval(), (torch.randn(1, 10, 32, dtype=torch.float16),)
    program = _compile(half, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    assert_matches(_run(program, inputs), torch_outputs(half, inputs), tol=2e-3)


def test_fused_operators_have_functional_and_out_schemas():
    from torchedge.exir.passes.fused_operators import fused_ops

    ops = fused_ops()
    q, k, v = (torch.randn(2, 5, 4) for _ in range(3))
    ref = torch.softmax(q @ k.transpose(-1, -2) * 0.5, -1) @ v
    np.testing.assert_allclose(ops["attention"](q, k, v, None, 0.5).numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    out = torch.empty(2, 5, 4)
    torch.ops.torchedge_fused.attention.out(q, k, v, None, 0.5, out=out)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    # interleaved: (batch, tokens, heads, width)
    q, k, v = (torch.randn(1, 5, 2, 4) for _ in range(3))
    ref = torch.softmax(q.transpose(1, 2) @ k.permute(0, 2, 3, 1) * 0.5, -1) @ v.transpose(1, 2)
    got = ops["attention_interleaved"](q, k, v, None, 0.5)
    np.testing.assert_allclose(got.numpy(), ref.transpose(1, 2).numpy(), rtol=1e-5, atol=1e-6)


class Recurrent(nn.Module):
    def __init__(self, kind, batch_first=True, initial_state=False):
        super().__init__()
        self.rnn = getattr(nn, kind)(6, 8, num_layers=2, batch_first=batch_first)
        self.kind, self.initial_state, self.batch_first = kind, initial_state, batch_first

    def forward(self, x):
        if not self.initial_state:
            return self.rnn(x)[0]
        h0 = torch.full((2, x.shape[0 if self.batch_first else 1], 8), 0.25)
        state = (h0, torch.full_like(h0, -0.5)) if self.kind == "LSTM" else h0
        output, last = self.rnn(x, state)
        return output, last[1] if self.kind == "LSTM" else last


@pytest.mark.parametrize(
    "kind, batch_first, initial_state, fused",
    [
        ("LSTM", True, False, 10),  # every step of both layers
        ("LSTM", False, True, 10),
        ("GRU", True, False, 8),  # the first step of each layer keeps its folded constant gates
        ("GRU", False, True, 8),
    ],
)
def test_recurrent_steps_fuse_bit_identically(kind, batch_first, initial_state, fused):
    """Each unrolled timestep's gate arithmetic becomes one cell kernel computing the same bits as the
    chain of kernels it replaces (and so eager's results within float rounding)."""
    torch.manual_seed(0)
    model = Recurrent(kind, batch_first, initial_state).eval()
    inputs = (torch.randn(3, 5, 6) if batch_first else torch.randn(5, 3, 6),)
    program = _compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    assert _fused_ops(program) == {f"torchedge_fused::{kind.lower()}_cell.out": fused}
    ops = collections.Counter(n.target for n in program.graph_module().graph.nodes if n.op == "call_function")
    assert ops[torch.ops.aten.addmm.out] <= 2, ops  # at most the layers' input projections: hidden ones are in cells
    got, chain = _run(program, inputs), _run(_compile(model, inputs), inputs)
    for g, c in zip(got, chain, strict=True):
        np.testing.assert_array_equal(g, c)
    assert_matches(got, torch_outputs(model, inputs), tol=1e-5)


def test_recurrent_fusion_leaves_a_step_with_a_shared_gate_alone():
    """A gate used outside its step (here the forget gate, returned as well) keeps the chain."""

    class Peek(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(4, 5)

        def forward(self, x, h, c):
            gates = x @ self.cell.weight_ih.T + h @ self.cell.weight_hh.T
            i, f, g, o = gates.chunk(4, -1)
            new_c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(new_c), torch.sigmoid(f)

    torch.manual_seed(0)
    model, inputs = Peek().eval(), (torch.randn(2, 4), torch.randn(2, 5), torch.randn(2, 5))
    program = _compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    assert not _fused_ops(program)
    assert_matches(_run(program, inputs), torch_outputs(model, inputs), tol=1e-5)
    program = _compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass(recurrent=False)]))
    assert not _fused_ops(program)


class HeadMoves(nn.Module):
    """The copies Hugging Face attention blocks export around their heads: permute, contiguous(),
    a same-shape view and two more permutes; a dropout-style clone of a linear's fresh output;
    and a clone of a value that is also used elsewhere (kept)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):  # x: (2, 3, 4, 8)
        y = x.permute(2, 0, 1, 3).contiguous().permute(1, 2, 0, 3).view(2, 3, 4, 8).permute(0, 2, 1, 3)
        z = self.proj(y).clone()
        kept = x.clone()
        return z + 1, kept * x


def test_copy_chains_collapse_to_one_permute_with_the_same_values():
    torch.manual_seed(0)
    model, inputs = HeadMoves().eval(), (torch.randn(2, 3, 4, 8),)

    def copies(program):
        return collections.Counter(
            str(n.target)
            for n in program.graph_module().graph.nodes
            if n.op == "call_function" and str(n.target) in ("aten.permute_copy.out", "aten.clone.out")
        )

    plain = _compile(model, inputs)
    fused = _compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    # the chain's three permutes and contiguous(), the linear's reshape of its 4-D input, z's clone, x's clone
    assert copies(plain) == {"aten.permute_copy.out": 3, "aten.clone.out": 4}
    assert copies(fused) == {"aten.permute_copy.out": 1, "aten.clone.out": 1}  # one permute; x's clone stays
    assert copies(_compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass(copies=False)]))) == (
        copies(plain)
    )
    got = _run(fused, inputs)
    for g, c in zip(got, _run(plain, inputs), strict=True):
        np.testing.assert_array_equal(g, c)  # data movement only: the very same bits
    assert_matches(got, torch_outputs(model, inputs), tol=1e-6)


class DynamicHeadMoves(nn.Module):
    def forward(self, x):  # x: (batch, 3, 4, 8)
        y = x.permute(2, 0, 1, 3).contiguous().permute(1, 2, 0, 3).view(x.shape).permute(0, 2, 1, 3)
        return y * 2


def test_copy_chains_collapse_with_a_dynamic_dimension():
    """A dynamic size passes through the collapsed permutes; the same-shape view between symbolic
    shapes is left as it is."""
    model = DynamicHeadMoves().eval()
    batch = torch.export.Dim("batch", min=1, max=6)
    exported = torch.export.export(model, (torch.randn(2, 3, 4, 8),), dynamic_shapes=({0: batch},))
    program = to_edge(exported).to_executorch(ExecutorchBackendConfig(passes=[FuseKernelsPass()]))
    permutes = [n for n in program.graph_module().graph.nodes if str(n.target) == "aten.permute_copy.out"]
    assert len(permutes) == 2  # permute, clone and permute before the view become one; the last stays
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for size in (1, 5):
        x = torch.randn(size, 3, 4, 8)
        assert_matches(method.execute([x.numpy()]), torch_outputs(model, (x,)), tol=0)
