"""Batch norms and even zero padding fold into convolutions at compile time; results match eager
on torchedge and on the real ExecuTorch, and what cannot fold exactly stays."""

import collections

import pytest
import torch
from torch import nn

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_run
from torchedge.exir import EdgeCompileConfig, to_edge

_BN = "aten._native_batch_norm_legit_no_training.out"
_PAD = "aten.constant_pad_nd.out"


def _compile(model, inputs, fold=True):
    config = EdgeCompileConfig(fold_constants=fold)
    return to_edge(torch.export.export(model.eval(), inputs), compile_config=config).to_executorch()


def _ops(program) -> collections.Counter:
    return collections.Counter(
        str(n.target) for n in program.graph_module().graph.nodes if n.op == "call_function" and "." in str(n.target)
    )


def _randomize(norm):
    with torch.no_grad():
        norm.running_mean.uniform_(-1, 1)
        norm.running_var.uniform_(0.2, 2)
        if norm.affine:
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-1, 1)
    return norm


class ConvNorm(nn.Module):
    def __init__(self, spatial=2, bias=True, affine=True, groups=1, pad=None, value=0.0):
        super().__init__()
        self.value = value
        conv, norm = {1: (nn.Conv1d, nn.BatchNorm1d), 2: (nn.Conv2d, nn.BatchNorm2d), 3: (nn.Conv3d, nn.BatchNorm3d)}[
            spatial
        ]
        self.pad = pad
        self.conv = conv(4, 8, 3, bias=bias, groups=groups)
        self.norm = _randomize(norm(8, affine=affine))

    def forward(self, x):
        if self.pad is not None:
            x = nn.functional.pad(x, self.pad, value=self.value)
        return torch.relu(self.norm(self.conv(x)))


FOLDED = {
    "2d": (lambda: ConvNorm(), (2, 4, 9, 9)),
    "no-bias": (lambda: ConvNorm(bias=False), (1, 4, 9, 9)),
    "not-affine": (lambda: ConvNorm(affine=False), (1, 4, 9, 9)),
    "grouped": (lambda: ConvNorm(groups=4), (1, 4, 9, 9)),
    "1d": (lambda: ConvNorm(spatial=1), (2, 4, 11)),
    "3d": (lambda: ConvNorm(spatial=3), (1, 4, 5, 6, 7)),
    "even-padding": (lambda: ConvNorm(pad=(1, 1, 2, 2)), (1, 4, 9, 9)),
    "no-padding": (lambda: ConvNorm(pad=(0, 0, 0, 0)), (1, 4, 9, 9)),
}


@pytest.mark.parametrize("name", list(FOLDED))
def test_batch_norm_and_even_padding_fold_into_the_convolution(name):
    torch.manual_seed(0)
    factory, shape = FOLDED[name]
    model, inputs = factory().eval(), (torch.randn(*shape),)
    program = _compile(model, inputs)
    ops = _ops(program)
    assert ops["aten.convolution.out"] == 1 and _BN not in ops and _PAD not in ops
    expected = torch_outputs(model, inputs)
    assert_matches(torchedge_run(program.buffer, inputs), expected, tol=1e-5)
    if name != "3d":  # ExecuTorch's portable convolution has 1-D and 2-D only
        assert_matches(executorch_run(program.buffer, inputs), expected, tol=1e-5)
    assert _BN in _ops(_compile(model, inputs, fold=False))  # folding is part of constant folding


class SharedConv(nn.Module):
    """The convolution's output is read by the batch norm and by the add."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(4, 4, 3, padding=1), _randomize(nn.BatchNorm2d(4))

    def forward(self, x):
        y = self.conv(x)
        return self.norm(y) + y


class TransposedNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.ConvTranspose2d(4, 8, 3), _randomize(nn.BatchNorm2d(8))

    def forward(self, x):
        return self.norm(self.conv(x))


class WeightAsInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = _randomize(nn.BatchNorm2d(8))

    def forward(self, x, w):
        return self.norm(nn.functional.conv2d(x, w))


KEPT = {
    "shared-output": (lambda: SharedConv(), [(1, 4, 6, 6)], _BN),
    "transposed": (lambda: TransposedNorm(), [(1, 4, 6, 6)], _BN),
    "runtime-weight": (lambda: WeightAsInput(), [(1, 4, 6, 6), (8, 4, 3, 3)], _BN),
    "uneven-padding": (lambda: ConvNorm(pad=(0, 1, 0, 1)), [(1, 4, 9, 9)], _PAD),
    "nonzero-padding": (lambda: ConvNorm(pad=(1, 1, 1, 1), value=0.5), [(1, 4, 9, 9)], _PAD),
    "negative-zero-padding": (lambda: ConvNorm(pad=(1, 1, 1, 1), value=-0.0), [(1, 4, 9, 9)], _PAD),
}


@pytest.mark.parametrize("name", list(KEPT))
def test_what_cannot_fold_exactly_stays(name):
    torch.manual_seed(0)
    factory, shapes, kept = KEPT[name]
    model, inputs = factory().eval(), tuple(torch.randn(*s) for s in shapes)
    program = _compile(model, inputs)
    assert kept in _ops(program)
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs), tol=1e-5)
