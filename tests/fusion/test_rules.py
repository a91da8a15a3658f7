"""Each rule of `torchedge.fusion.rules` on a small model, through both adapters: at load it
fires (under its own name) and a rule of level ``exact`` gives the bits of ``fuse=False``; ahead
of time (`FuseKernelsPass`, for the rules staged there) it puts its fused operator in the graph,
with eager's results.
A rule that raises is an error in either adapter, never a skipped rule."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from tests.conftest import assert_matches, torch_outputs, torchedge_compile
from tests.fusion.attention_model import Attention
from torchedge.exir.config import ExecutorchBackendConfig
from torchedge.exir.passes import kernel_fusion
from torchedge.exir.passes.kernel_fusion import FuseKernelsPass
from torchedge.fusion import FusionOptions
from torchedge.fusion.rules import RULES
from torchedge.runtime import Runtime
from torchedge.runtime.fusion import replaced_instructions


class Linear(nn.Module):
    """A linear layer on a 3-D input (the product seen through a reshape) and an activation."""

    def __init__(self, activation, bias=True):
        super().__init__()
        self.linear, self.activation = nn.Linear(16, 24, bias=bias), activation

    def forward(self, x):
        return self.activation(self.linear(x))


class PaddedConvolution(nn.Module):
    """TensorFlow-style "same" padding (one more zero after than before), a convolution, relu6."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2)

    def forward(self, x):
        return nn.functional.relu6(self.conv(nn.functional.pad(x, (0, 1, 0, 1))))


class MaxPool(nn.Module):
    """Max pooling whose indices nothing reads (core ATen's ``max_pool2d_with_indices``)."""

    def forward(self, x):
        return nn.functional.max_pool2d(x, 3, 2, 1) * 2


class MovedHeads(nn.Module):
    """Heads moved back to their tokens through a permute, a ``contiguous()`` and a reshape."""

    def forward(self, x):
        return (x * 2).permute(0, 2, 1, 3).contiguous().reshape(1, 6, 8).permute(0, 2, 1) + 1


class InvertedResidual(nn.Module):
    """MobileNetV2's block: a 1x1 expansion, relu6, a depthwise convolution, relu6, a 1x1 projection."""

    def __init__(self):
        super().__init__()
        self.expand, self.project = nn.Conv2d(4, 24, 1), nn.Conv2d(24, 4, 1)
        self.depthwise = nn.Conv2d(24, 24, 3, padding=1, groups=24)

    def forward(self, x):
        hidden = nn.functional.relu6(self.depthwise(nn.functional.relu6(self.expand(x))))
        return x + self.project(hidden)


class Recurrent(nn.Module):
    """An LSTM layer (one timestep: one cell)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 8, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


# rule -> (model, inputs, the fused operator ahead of time: None for a rule staged at load only)
CASES = {
    "fast_attention": (Attention, (1, 6, 16), "torchedge_fused::attention.out"),
    "attention": (Attention, (1, 6, 16), "torchedge_fused::attention_exact.out"),
    "safe_softmax_rows": (Attention, (1, 6, 16), None),
    "convolution_block": (PaddedConvolution, (1, 3, 9, 9), "torchedge_fused::conv_bn_act.out"),
    "linear_act": (lambda: Linear(torch.relu), (2, 5, 16), "torchedge_fused::linear_act.out"),
    "linear_silu": (lambda: Linear(nn.functional.silu, bias=False), (5, 16), "torchedge_fused::linear_act.out"),
    "max_pool_values": (MaxPool, (1, 3, 9, 9), None),
    "copy_chain": (MovedHeads, (1, 2, 6, 4), None),
    "inverted_residual": (InvertedResidual, (2, 4, 7, 6), None),
    "recurrent": (Recurrent, (2, 1, 4), "torchedge_fused::lstm_cell.out"),
}
AHEAD_OF_TIME = [name for name, (_, _, op) in CASES.items() if op is not None]


def _case(name):
    torch.manual_seed(0)
    factory, shape, op = CASES[name]
    return factory().eval(), (torch.randn(*shape),), op


def test_every_rule_has_a_case_and_its_stages():
    assert set(CASES) == {r.name for r in RULES if r.arguments is not None}
    assert AHEAD_OF_TIME == [name for name in CASES if "aot" in next(r for r in RULES if r.name == name).stages]


@pytest.mark.parametrize("name", list(CASES))
def test_rule_fires_at_load_with_the_bits_its_level_promises(name):
    model, inputs, _ = _case(name)
    rule = next(r for r in RULES if r.name == name)
    others = frozenset(r.name for r in RULES if r.name != name)
    program = Runtime.get().load_program(torchedge_compile(model, inputs).buffer)
    fused, plain = (
        program.load_method("forward", fuse=FusionOptions(rule.level, others)),
        program.load_method("forward", fuse=False),
    )
    assert set(entry[0] for entry in replaced_instructions(fused._steps).values()) <= {name}
    assert [s.label for s in fused._steps] != [s.label for s in plain._steps]  # (the others are off: it fired)
    arrays = [t.numpy() for t in inputs]
    got, want = fused.execute(arrays), plain.execute(arrays)
    for a, b in zip(got, want):
        if rule.level == "exact":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert_matches(got, torch_outputs(model, inputs), tol=1e-5)


@pytest.mark.parametrize("name", AHEAD_OF_TIME)
def test_rule_fires_ahead_of_time(name):
    model, inputs, op = _case(name)
    others = [r.name for r in RULES if r.name != name]
    program = torchedge_compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass(disabled=others)]))
    fused = collections.Counter(
        n.target.name() for n in program.graph_module().graph.nodes if "torchedge_fused" in str(n.target)
    )
    assert fused == {op: 1}
    outputs = Runtime.get().load_program(program.buffer).load_method("forward").execute([t.numpy() for t in inputs])
    assert_matches(outputs, torch_outputs(model, inputs), tol=1e-5)


def test_inverted_residual_fuses_at_level_all_only():
    """Its kernel may sum in another order than the three convolutions: a default (exact) load
    keeps them."""
    model, inputs, _ = _case("inverted_residual")
    program = Runtime.get().load_program(torchedge_compile(model, inputs).buffer)
    rules = {
        level: {entry[0] for entry in replaced_instructions(program.load_method("forward", fuse=level)._steps).values()}
        for level in ("exact", "all")
    }
    assert "inverted_residual" not in rules["exact"] and "inverted_residual" in rules["all"]


def test_gelu_with_tanh_is_left_alone():
    model = Linear(lambda x: nn.functional.gelu(x, approximate="tanh")).eval()
    inputs = (torch.randn(5, 16),)
    program = Runtime.get().load_program(torchedge_compile(model, inputs).buffer)
    assert not replaced_instructions(program.load_method("forward", fuse="all")._steps)


def _raising(monkeypatch, module, name):
    def broken(found):
        raise TypeError("a guard comparing a shape with None")

    rules = tuple(dataclasses.replace(r, guard=broken) if r.name == name else r for r in RULES)
    monkeypatch.setattr(module, "RULES", rules)


@pytest.mark.parametrize("name", ["linear_act", "attention"])
def test_a_raising_guard_propagates_at_load(monkeypatch, name):
    from torchedge.fusion import options

    model, inputs, _ = _case(name)
    buffer = torchedge_compile(model, inputs).buffer
    _raising(monkeypatch, options, name)
    with pytest.raises(TypeError, match="a guard comparing"):
        Runtime.get().load_program(buffer).load_method("forward")


def test_a_raising_guard_propagates_ahead_of_time(monkeypatch):
    model, inputs, _ = _case("linear_act")
    _raising(monkeypatch, kernel_fusion, "linear_act")
    with pytest.raises(TypeError, match="a guard comparing"):
        torchedge_compile(model, inputs, ExecutorchBackendConfig(passes=[FuseKernelsPass()]))


class Convolution(nn.Module):
    """A convolution (1-D or 2-D), zeros padded before it, then ``after``."""

    def __init__(self, after, pad=(), spatial=2):
        super().__init__()
        self.conv = (nn.Conv1d if spatial == 1 else nn.Conv2d)(3, 4, 3)
        self.after, self.pad = after, pad

    def forward(self, x):
        return self.after(self.conv(nn.functional.pad(x, self.pad) if self.pad else x))


@pytest.mark.parametrize(
    "after, pad, spatial, fused",
    [
        (lambda y: y.clamp(min=0.25), (), 2, "convolution.out + clamp.out"),
        (lambda y: y.clamp(max=-0.25), (), 2, "convolution.out + clamp.out"),
        (
            lambda y: nn.functional.hardtanh(y, -0.5, 0.5),
            (1, 2, 0, 3),
            2,
            "constant_pad_nd.out + convolution.out + hardtanh.out",
        ),
        (lambda y: y, (2, 1), 1, "constant_pad_nd.out + convolution.out"),
        (torch.relu, (0, 1), 2, "constant_pad_nd.out + convolution.out + relu.out"),  # the last dim only
        (lambda y: y * 2, (), 2, None),  # nothing to fold into the convolution
    ],
)
def test_convolution_blocks_fuse_with_the_bits_of_the_steps(after, pad, spatial, fused):
    torch.manual_seed(0)
    model = Convolution(after, pad, spatial).eval()
    inputs = (torch.randn(1, 3, *(9,) * spatial),)
    program = Runtime.get().load_program(torchedge_compile(model, inputs).buffer)
    method = program.load_method("forward")
    labels = [s.label for s in method._steps if "fused at load" in s.label]
    assert labels == ([] if fused is None else [f"{fused} (fused at load)"])
    arrays = [t.numpy() for t in inputs]
    np.testing.assert_array_equal(
        method.execute(arrays)[0], program.load_method("forward", fuse=False).execute(arrays)[0]
    )
    assert_matches(method.execute(arrays), torch_outputs(model, inputs), tol=1e-5)
