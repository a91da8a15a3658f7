"""torchedge's XNNPACK lowering (`torchedge.backends.xnnpack.aot`): programs lowered with
torchedge's `XnnpackPartitioner` run on ExecuTorch's runtime (XNNPACK itself) and on torchedge's
interpreter, agree with eager within 1e-5, and leave no more operators outside delegates than
ExecuTorch's own `XnnpackPartitioner` does for the same model where torchedge claims coverage.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack.aot import XnnpackPartitioner  # noqa: E402
from torchedge.backends.xnnpack.header import split_payload  # noqa: E402
from torchedge.backends.xnnpack.payload_tables import decode_graph  # noqa: E402
from torchedge.errors import ExportError  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.schema.program import DelegateCall, KernelCall  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402


def _lower(model, inputs, **options) -> bytes:
    ep = torch.export.export(model.eval(), tuple(inputs))
    return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner(**options)]).to_executorch().buffer


def _lower_executorch(model, inputs) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower

    ep = torch.export.export(model.eval(), tuple(inputs))
    return et_lower(ep, partitioner=[ETX()]).to_executorch().buffer


def _calls(buffer: bytes) -> tuple[int, int]:
    """(kernel calls, delegate calls) of the forward method."""
    plan = deserialize_pte(buffer).program.execution_plan[0]
    kinds = [type(i.instr_args) for chain in plan.chains for i in chain.instructions]
    return kinds.count(KernelCall), kinds.count(DelegateCall)


def _node_kinds(buffer: bytes) -> list[str]:
    pte = deserialize_pte(buffer)
    kinds = []
    for delegate in pte.program.execution_plan[0].delegates:
        assert delegate.id == "XnnpackBackend"
        flatbuffer, _ = split_payload(pte.delegate_data(delegate))
        kinds += [type(n.xnode_union).__name__ for n in decode_graph(flatbuffer).xnodes]
    return kinds


def _assert_close(got, want, tol: float = 1e-5) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{g.shape} {g.dtype} != {w.shape} {w.dtype}"
        scale = float(np.max(np.abs(w.astype(np.float64)))) if w.size else 0.0
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


def _eager(model, inputs) -> list[np.ndarray]:
    with torch.no_grad():
        out = model.eval()(*inputs)
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [o.numpy() for o in out]


def _check(model, inputs, *, tol: float = 1e-5, compare_executorch: bool = True) -> bytes:
    """Lower, run on both runtimes, compare with eager and with ExecuTorch's lowering."""
    buffer = _lower(model, inputs)
    want = _eager(model, inputs)
    arrays = [i.numpy() for i in inputs]
    _assert_close(executorch_run(buffer, arrays), want, tol)
    _assert_close(torchedge_run(buffer, arrays), want, tol)
    kernels, delegates = _calls(buffer)
    assert delegates >= 1
    if compare_executorch:
        theirs, _ = _calls(_lower_executorch(model, inputs))
        assert kernels <= theirs, f"{kernels} operators outside delegates, ExecuTorch's lowering leaves {theirs}"
    return buffer


# ------------------------------------------------------------------------------------------------
# Zoo models


@functools.cache
def _zoo(name: str):
    from torchedge.models import load_model

    return load_model(name)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_zoo_model_is_fully_delegated_and_matches_eager(name):
    model, inputs = _zoo(name)
    buffer = _check(model, inputs)
    assert _calls(buffer) == (0, 1)


def test_cnn_payload_keeps_a_channels_last_chain():
    model, inputs = _zoo("cnn")
    kinds = _node_kinds(_lower(model, inputs))
    # One transpose in (NCHW input -> NHWC); conv -> relu -> pool -> conv -> relu -> mean stay
    # NHWC; the mean's [N, C] result needs no transpose back.
    assert kinds.count("XNNStaticTranspose") == 1
    assert "XNNClamp" not in kinds  # both relus fused into their convolutions


# ------------------------------------------------------------------------------------------------
# Operators


class _Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class _Linear(nn.Module):
    def __init__(self, bias: bool, rank: int):
        super().__init__()
        self.linear = nn.Linear(16, 8, bias=bias)
        self.rank = rank

    def forward(self, x):
        return self.linear(x)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rank", [2, 3])
def test_linear(bias, rank):
    shape = (4, 16) if rank == 2 else (2, 3, 16)
    _check(_Linear(bias, rank), (_x(*shape),))


class _Weights(nn.Module):
    """A matmul by a transposed parameter: the permute is folded into the filter."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(_x(8, 16, seed=3))

    def forward(self, x):
        return x @ self.w.t() + 1.0


def test_mm_with_permuted_parameter():
    _check(_Weights(), (_x(4, 16),))


ELEMENTWISE = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 1),
    "broadcast": lambda a, b: a * b[:, :1] + 2.0,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_binary(name):
    _check(_Fn(ELEMENTWISE[name]), (_x(4, 6), _x(4, 6, seed=1)))


UNARY = {
    "relu": F.relu,
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 0.75),
    "relu6": F.relu6,
    "clamp": lambda x: torch.clamp(x, -0.3, 0.4),
    "clamp_min": lambda x: torch.clamp(x, min=-0.1),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "gelu": F.gelu,
    "hardswish": F.hardswish,
    "softmax": lambda x: torch.softmax(x, -1),
    "abs_neg": lambda x: -torch.abs(x),
    "exp": torch.exp,
    "sqrt": lambda x: torch.sqrt(x.abs()),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "elu": F.elu,
    "floor_ceil": lambda x: torch.floor(x) + torch.ceil(x),
    "sin_cos": lambda x: torch.sin(x) * torch.cos(x),
    "square": lambda x: x.pow(2),
}


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    _check(_Fn(UNARY[name]), (_x(3, 5, 7),))


class _Conv(nn.Module):
    def __init__(self, groups: int = 1, stride: int = 1, padding: int = 1, dilation: int = 1, bias: bool = True):
        super().__init__()
        self.conv = nn.Conv2d(8, 16 if groups == 1 else 8 * 2, 3, stride, padding, dilation, groups, bias)

    def forward(self, x):
        return F.relu(self.conv(x))


@pytest.mark.parametrize(
    "options",
    [{}, {"bias": False}, {"stride": 2, "padding": 0}, {"dilation": 2, "padding": 2}, {"groups": 8}, {"groups": 2}],
    ids=["plain", "no_bias", "stride2", "dilated", "depthwise", "grouped"],
)
def test_conv2d(options):
    _check(_Conv(**options), (_x(2, 8, 9, 10),))


class _ConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.bn1d = nn.BatchNorm1d(8)
        with torch.no_grad():
            for bn in (self.bn, self.bn1d):
                bn.running_mean.uniform_(-1, 1)
                bn.running_var.uniform_(0.5, 2)
                bn.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        h = F.hardtanh(self.bn(self.conv(x)))
        return self.bn1d(h.mean([2, 3]))


def test_batch_norm_folded_and_standalone():
    _check(_ConvBn(), (_x(2, 3, 8, 8),))


POOLS = {
    "max": lambda x: F.max_pool2d(x, 2),
    "max_padded": lambda x: F.max_pool2d(x, 3, 2, 1),
    "max_ceil": lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True),
    "max_dilated": lambda x: F.max_pool2d(x, 2, 1, dilation=2),
    "avg": lambda x: F.avg_pool2d(x, 2),
    "avg_strided": lambda x: F.avg_pool2d(x, 3, 2),
    "avg_unpadded_count": lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False),
    "mean_keepdim": lambda x: x.mean([2, 3], keepdim=True),
    "mean": lambda x: x.mean([-1, -2]),
    "pad": lambda x: F.max_pool2d(F.pad(x, (0, 1, 2, 1)), 2),
}


@pytest.mark.parametrize("name", POOLS)
def test_pooling_after_conv(name):
    conv = nn.Conv2d(3, 4, 1)
    _check(_Fn(lambda x: POOLS[name](conv(x))), (_x(2, 3, 11, 10),))


SHAPE = {
    "cat": lambda a, b: torch.cat([a, b, a], 1),
    "cat_many": lambda a, b: torch.cat([a, b, a, b, a, b, a], -1),
    "permute": lambda a, b: a.permute(2, 0, 1) + 1,
    "reshape": lambda a, b: (a + b).reshape(4, -1),
    "slice": lambda a, b: (a * b)[:, 1:3, 2:],
    "select": lambda a, b: (a - b)[:, 1],
    "unsqueeze": lambda a, b: (a + b).unsqueeze(1),
    "bmm": lambda a, b: torch.bmm(a, b.transpose(1, 2)),
    "matmul": lambda a, b: a @ b.transpose(-1, -2),
    "pad": lambda a, b: F.pad(a * b, (1, 2, 0, 1), value=0.5),
}


@pytest.mark.parametrize("name", SHAPE)
def test_data_movement_and_products(name):
    _check(_Fn(SHAPE[name]), (_x(2, 4, 6), _x(2, 4, 6, seed=1)))


class _Channels(nn.Module):
    """Channels-last chains meeting NCHW operators: cat, add and a permute between convs."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 4, 1)
        self.c = nn.Conv2d(8, 6, 3, groups=2)

    def forward(self, x):
        a, b = F.relu(self.a(x)), torch.sigmoid(self.b(x))
        h = self.c(torch.cat([a, b], 1) + 0.5)
        return h, h.permute(0, 2, 3, 1).reshape(2, -1), F.max_pool2d(h, 2) * h.mean([2, 3], keepdim=True)


def test_channels_last_meets_nchw():
    _check(_Channels(), (_x(2, 3, 12, 12),))


# ------------------------------------------------------------------------------------------------
# Partitioning


class _Mixed(nn.Module):
    """float32 work around operators XNNPACK does not take (cumsum, an int64 argmax)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)

    def forward(self, x):
        h = torch.cumsum(F.relu(self.linear(x)), -1)
        return torch.sigmoid(h) * 2, torch.argmax(h, -1)


def test_unsupported_operators_stay_portable_and_the_program_runs():
    model, inputs = _Mixed(), (_x(3, 6),)
    buffer = _lower(model, inputs)
    kernels, delegates = _calls(buffer)
    assert kernels == 2 and delegates == 2  # cumsum and argmax portable; two delegates around them
    arrays = [i.numpy() for i in inputs]
    want = _eager(model, inputs)
    _assert_close(executorch_run(buffer, arrays), want)
    _assert_close(torchedge_run(buffer, arrays), want)


def test_per_op_mode_makes_one_delegate_per_operator():
    model, inputs = _zoo("mlp")
    buffer = _lower(model, inputs, per_op_mode=True)
    assert _calls(buffer) == (0, 5)  # three fully connected, two relus
    _assert_close(executorch_run(buffer, [i.numpy() for i in inputs]), _eager(model, inputs))


def test_an_unsupported_precision_is_refused():
    with pytest.raises(ExportError, match="config_precisions"):
        XnnpackPartitioner(config_precisions=["FP16"])


def test_constants_live_in_the_programs_named_data():
    """Constants are named data (by SHA-256, as ExecuTorch's lowering writes them), not payload
    bytes, and stored once each."""
    model, inputs = _zoo("mlp")
    pte = deserialize_pte(_lower(model, inputs))
    (delegate,) = pte.program.execution_plan[0].delegates
    flatbuffer, constant_data = split_payload(pte.delegate_data(delegate))
    graph = decode_graph(flatbuffer)
    assert graph.constant_data[0].size == 0 and len(constant_data) == 0
    named = graph.constant_data[1:]
    assert all(bytes(pte.named_data(entry.named_key)) for entry in named)
    assert len({entry.named_key for entry in named}) == len(named)
    parameters = sum(p.numel() for p in model.parameters()) * 4
    assert sum(entry.size for entry in named) == parameters
