"""The ONNX lowering against PyTorch eager: operator families from a table, then every zoo model.

The cases of a family are exported together with torchedge's ``to_edge`` (one
export per family keeps the file fast), must be supported node for node, are
lowered with `lower_exported_program` at the lowest and highest supported
opsets, and run on ONNX Runtime's CPU provider.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.export.graph_signature import InputKind

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from tests.conftest import assert_matches, relative_error, torch_outputs  # noqa: E402
from torchedge.backends.onnxruntime.lowering import (  # noqa: E402
    MAX_OPSET,
    MIN_OPSET,
    is_supported,
    lower_exported_program,
    lower_graph,
)
from torchedge.errors import ExportError  # noqa: E402
from torchedge.exir import EdgeCompileConfig, to_edge  # noqa: E402
from torchedge.models.zoo import load_model  # noqa: E402

_GEN = torch.Generator().manual_seed(0)


def randn(*shape, dtype=torch.float32):
    return torch.randn(shape, generator=_GEN).to(dtype)


def positive(*shape):
    return torch.rand(shape, generator=_GEN) + 0.1


def ints(*shape, high=5):
    return torch.randint(-high, high + 1, shape, generator=_GEN)


def bools(*shape):
    return torch.rand(shape, generator=_GEN) < 0.5


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


@dataclass
class Case:
    id: str
    module: object  # an nn.Module, or a function of the inputs
    inputs: tuple
    ops: tuple = ()  # Edge operators the case must exercise, e.g. "aten.index.Tensor"


_UNARY = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "exp": torch.exp,
    "sin": torch.sin,
    "cos": torch.cos,
    "erf": torch.erf,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "neg": torch.neg,
    "abs": torch.abs,
    "reciprocal": torch.reciprocal,
}
_POSITIVE_UNARY = {"log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt}
_BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}
_COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
_LOGICAL = {
    "and": torch.logical_and,
    "or": torch.logical_or,
    "xor": torch.logical_xor,
    "bitand": operator.and_,
    "bitor": operator.or_,
    "bitxor": operator.xor,
}

ELEMENTWISE = [
    *(Case(n, f, (randn(3, 4),), (f"aten.{n}.default",)) for n, f in _UNARY.items()),
    *(Case(n, f, (positive(3, 4),), (f"aten.{n}.default",)) for n, f in _POSITIVE_UNARY.items()),
    Case("neg_int", torch.neg, (ints(3, 4),)),
    Case("sigmoid_of_int", torch.sigmoid, (ints(3, 4),)),
    *(Case(n, f, (randn(3, 4), randn(4) + 3)) for n, f in _BINARY.items()),
    *(Case(f"{n}_int", f, (ints(3, 4), ints(3, 1))) for n, f in _BINARY.items() if n != "div"),
    Case("add_alpha", lambda x, y: torch.add(x, y, alpha=2.5), (randn(3, 4), randn(3, 4))),
    Case("sub_literal", lambda x: x - 1.5, (randn(3, 4),)),
    *(
        Case(
            f"{n}_scalar",
            lambda x, n=n: getattr(torch.ops.aten, n).Scalar(x, 0.375),
            (randn(3, 4),),
            (f"aten.{n}.Scalar",),
        )
        for n in ("add", "sub", "mul", "div")
    ),
    Case("int_plus_float", torch.add, (ints(3, 4), randn(3, 4))),
    Case("int_div_int", torch.div, (ints(3, 4), ints(3, 4, high=3).abs() + 1)),
    Case("float_plus_double_constant", lambda x: x + torch.tensor(1.5, dtype=torch.float64), (randn(3, 4),)),
    Case("pow_scalar", lambda x: x**2, (randn(3, 4),), ("aten.pow.Tensor_Scalar",)),
    Case("pow_tensor", torch.pow, (positive(3, 4), randn(3, 4))),
    Case("pow_of_scalar", lambda x: 2.0**x, (randn(3, 4),)),
    *(Case(n, f, (randn(3, 4), randn(3, 4).round())) for n, f in _COMPARE.items()),
    *(Case(f"{n}_scalar", lambda x, f=f: f(x, 0.0), (randn(3, 4).round(),)) for n, f in _COMPARE.items()),
    Case("lt_int_float", lambda x: x < 0.5, (ints(3, 4),)),
    Case("eq_bool", torch.eq, (bools(3, 4), bools(3, 4))),
    *(Case(f"logical_{n}", f, (bools(3, 4), bools(3, 4))) for n, f in _LOGICAL.items()),
    Case("logical_and_float", torch.logical_and, (randn(3, 4).round(), bools(3, 4))),
    Case("logical_not", torch.logical_not, (randn(3, 4).round(),)),
    Case("bitwise_not_bool", torch.bitwise_not, (bools(3, 4),)),
    Case("where", torch.where, (bools(3, 4), randn(3, 4), randn(4)), ("aten.where.self",)),
    Case("where_mixed_dtypes", torch.where, (bools(3, 4), ints(3, 4), randn(3, 4))),
    Case("masked_fill", lambda x, m: x.masked_fill(m, -1e9), (randn(3, 4), bools(3, 4))),
    Case("clamp", lambda x: x.clamp(-0.5, 0.7), (randn(3, 4),), ("aten.clamp.default",)),
    Case("clamp_min", lambda x: x.clamp(min=0.1), (randn(3, 4),)),
    Case("clamp_int", lambda x: x.clamp(-2, 3), (ints(3, 4),)),
    Case("hardtanh", F.hardtanh, (randn(3, 4) * 2,), ("aten.hardtanh.default",)),
    Case("relu6", F.relu6, (randn(3, 4) * 8,)),
    Case("leaky_relu", lambda x: F.leaky_relu(x, 0.2), (randn(3, 4),)),
    Case("gelu", F.gelu, (randn(3, 4) * 3,), ("aten.gelu.default",)),
    Case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), (randn(3, 4) * 3,)),
]


def _batch_norm(layer):
    layer.running_mean.copy_(randn(layer.num_features) * 0.1)
    layer.running_var.copy_(positive(layer.num_features) + 0.5)
    return layer.eval()


NN = [
    Case("conv2d", nn.Conv2d(3, 8, 3, stride=2, padding=1), (randn(2, 3, 9, 9),), ("aten.convolution.default",)),
    Case("conv2d_dilated_no_bias", nn.Conv2d(4, 6, 3, dilation=2, padding=2, bias=False), (randn(1, 4, 8, 8),)),
    Case("conv2d_grouped", nn.Conv2d(4, 8, 3, groups=2), (randn(1, 4, 7, 7),)),
    Case("conv2d_depthwise", nn.Conv2d(6, 6, 3, groups=6, padding=(1, 0)), (randn(1, 6, 7, 7),)),
    Case("conv1d", nn.Conv1d(3, 5, 4, stride=2), (randn(2, 3, 11),)),
    Case("conv_transpose2d", nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), (randn(1, 4, 5, 5),)),
    Case("linear", nn.Linear(8, 5), (randn(4, 8),), ("aten.addmm.default",)),
    Case("linear_3d", nn.Linear(8, 5), (randn(2, 3, 8),)),
    Case("linear_no_bias", nn.Linear(8, 5, bias=False), (randn(4, 8),), ("aten.mm.default",)),
    Case("bmm", torch.matmul, (randn(2, 3, 4), randn(2, 4, 5)), ("aten.bmm.default",)),
    Case(
        "batch_norm2d",
        _batch_norm(nn.BatchNorm2d(4)),
        (randn(2, 4, 5, 5),),
        ("aten._native_batch_norm_legit_no_training.default",),
    ),
    Case("batch_norm1d", _batch_norm(nn.BatchNorm1d(4)), (randn(3, 4),)),
    Case("batch_norm_no_affine", _batch_norm(nn.BatchNorm2d(4, affine=False)), (randn(2, 4, 3, 3),)),
    Case("layer_norm", nn.LayerNorm(8), (randn(2, 3, 8),), ("aten.native_layer_norm.default",)),
    Case("layer_norm_2d_no_affine", nn.LayerNorm((3, 8), elementwise_affine=False), (randn(2, 3, 8),)),
    Case("softmax", lambda x: x.softmax(-1), (randn(2, 3, 8),), ("aten._softmax.default",)),
    Case("log_softmax", lambda x: x.log_softmax(1), (randn(2, 3, 8),), ("aten._log_softmax.default",)),
    Case(
        "max_pool2d",
        nn.MaxPool2d(3, stride=2, padding=1),
        (randn(1, 3, 8, 8),),
        ("aten.max_pool2d_with_indices.default",),
    ),
    Case("max_pool2d_dilated", nn.MaxPool2d(2, dilation=2), (randn(1, 3, 9, 9),)),
    Case("max_pool2d_ceil", nn.MaxPool2d(2, ceil_mode=True), (randn(1, 3, 7, 7),)),
    Case("avg_pool2d", nn.AvgPool2d(3, stride=2, padding=1), (randn(1, 3, 8, 8),), ("aten.avg_pool2d.default",)),
    Case(
        "avg_pool2d_no_pad_count", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (randn(1, 3, 8, 8),)
    ),
    Case("adaptive_avg_pool_1", nn.AdaptiveAvgPool2d(1), (randn(1, 3, 7, 7),)),
    Case(
        "adaptive_avg_pool_2",
        nn.AdaptiveAvgPool2d((2, 3)),
        (randn(1, 3, 8, 9),),
        ("aten._adaptive_avg_pool2d.default",),
    ),
    Case("embedding", nn.Embedding(10, 4), (torch.tensor([[1, 3, 9], [0, 0, 2]]),), ("aten.embedding.default",)),
]

SHAPE = [
    Case("view", lambda x: x.view(4, 6) * 2, (randn(2, 3, 4),), ("aten.view_copy.default",)),
    Case("flatten", lambda x: torch.flatten(x, 1), (randn(2, 3, 4),)),
    Case("unsqueeze_squeeze", lambda x: x.unsqueeze(1).squeeze(0), (randn(1, 3, 4),), ("aten.unsqueeze_copy.default",)),
    Case("permute", lambda x: x.permute(2, 0, 1), (randn(2, 3, 4),), ("aten.permute_copy.default",)),
    Case("transpose", lambda x: x.transpose(0, -1) + 0, (randn(2, 3, 4),)),
    Case("t", lambda x: x.t() + 0, (randn(3, 4),)),
    Case("expand", lambda x: x.expand(2, 3, 4) + 0, (randn(3, 1),), ("aten.expand_copy.default",)),
    Case("slice", lambda x: x[:, 1:7:2] + 0, (randn(3, 8),), ("aten.slice_copy.Tensor",)),
    Case("slice_negative", lambda x: x[..., -3:] + 0, (randn(3, 8),)),
    Case("select", lambda x: x[:, -1] + 0, (randn(3, 8),), ("aten.select_copy.int",)),
    Case("cat", lambda x, y: torch.cat([x, y, x], 1), (randn(2, 3), randn(2, 5)), ("aten.cat.default",)),
    Case("cat_mixed_dtypes", lambda x, y: torch.cat([x, y]), (randn(2, 3), ints(2, 3))),
    Case(
        "split",
        lambda x: [t * 1 for t in x.split([2, 3, 1], 1)],
        (randn(2, 6),),
        ("aten.split_with_sizes_copy.default",),
    ),
    Case("chunk", lambda x: [t * 1 for t in x.chunk(3, 0)], (randn(7, 2),)),
    Case("unbind", lambda x: [t * 1 for t in x.unbind(1)], (randn(2, 3, 4),)),
    Case("pad", lambda x: F.pad(x, (1, 2, 0, 3), value=0.5), (randn(1, 2, 3, 4),), ("aten.constant_pad_nd.default",)),
    Case("pad_crop", lambda x: F.pad(x, (-1, 2)), (randn(2, 5),)),
    Case("clone", lambda x: x.clone(), (randn(3, 4),), ("aten.clone.default",)),
    Case("detach", lambda x: x.detach() * 2, (randn(3, 4),), ("aten.alias_copy.default",)),
    Case("to_dtype", lambda x: x.to(torch.int64), (randn(3, 4) * 5,), ("aten._to_copy.default",)),
    Case("to_bool", lambda x: x.to(torch.bool), (randn(3, 4).round(),)),
    Case("index", lambda x, i: x[:, i], (randn(3, 5), torch.tensor([4, 0, -1])), ("aten.index.Tensor",)),
    Case("index_select", lambda x, i: x.index_select(1, i), (randn(3, 5), torch.tensor([2, 2, 0]))),
]

REDUCE = [
    Case("mean", lambda x: x.mean((1, -1), keepdim=True), (randn(2, 3, 4),), ("aten.mean.dim",)),
    Case("mean_all", lambda x: x.mean(), (randn(2, 3, 4),)),
    Case("sum", lambda x: x.sum(1), (randn(2, 3, 4),), ("aten.sum.dim_IntList",)),
    Case("sum_all", lambda x: x.sum(), (randn(2, 3, 4),)),
    Case("sum_of_bool", lambda x: (x > 0).sum(-1), (randn(2, 3, 4),)),
    Case("amax", lambda x: x.amax(-1), (randn(2, 3, 4),), ("aten.amax.default",)),
    Case("amin_keepdim", lambda x: x.amin(0, keepdim=True), (randn(2, 3, 4),), ("aten.amin.default",)),
    Case("any", lambda x: x.any(-1), (bools(2, 3, 4),), ("aten.any.dim",)),
    Case("any_of_float", lambda x: x.round().any(), (randn(2, 3),)),
    Case("any_dims", lambda x: x.any(dim=(0, 2)), (bools(2, 3, 4),), ("aten.any.dims",)),
    Case("all", lambda x: x.all(1), (bools(2, 3, 4),)),
    Case("cumsum", lambda x: x.cumsum(1), (randn(2, 5),), ("aten.cumsum.default",)),
    Case("cumsum_int", lambda x: x.cumsum(0), (ints(4, 3),)),
    Case(
        "causal_mask",
        lambda x: x.masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float("-inf")),
        (randn(2, 4, 4),),
    ),
]

CREATE = [  # exported without constant folding, which would otherwise evaluate these itself
    Case("full_like", lambda x: x + torch.full_like(x, 2.0), (randn(2, 3),), ("aten.full_like.default",)),
    Case("full", lambda x: x + torch.zeros(2, 3), (randn(2, 3),), ("aten.full.default",)),
    Case("arange", lambda x: x + torch.arange(0.5, 3.5, 1.0), (randn(2, 3),), ("aten.arange.start_step",)),
    Case("scalar_tensor", lambda x: x * 3, (randn(2, 3),), ("aten.scalar_tensor.default",)),
]

# The Edge verifier rejects some valid graphs (split_with_sizes_copy's list of returns);
# checking the IR is its own tests' business, not this file's.
_UNCHECKED = EdgeCompileConfig(_check_ir_validity=False)
FAMILIES = {  # name -> (cases, how to_edge compiles them)
    "elementwise": (ELEMENTWISE, _UNCHECKED),
    "nn": (NN, _UNCHECKED),
    "shape": (SHAPE, _UNCHECKED),
    "reduce": (REDUCE, _UNCHECKED),
    "create": (CREATE, EdgeCompileConfig(_check_ir_validity=False, fold_constants=False)),
}


class Family(nn.Module):
    """Every case of a table side by side in one module: one export (the slow part) covers them all."""

    def __init__(self, cases):
        super().__init__()
        self.parts = nn.ModuleList(_module(c.module) for c in cases)
        self.arity = [len(c.inputs) for c in cases]

    def forward(self, *xs):
        outs, start = [], 0
        for part, n in zip(self.parts, self.arity):
            out = part(*xs[start : start + n])
            outs.extend(out if isinstance(out, (list, tuple)) else [out])
            start += n
        return outs


def _module(module_or_fn) -> nn.Module:
    return (module_or_fn if isinstance(module_or_fn, nn.Module) else Fn(module_or_fn)).eval()


def _edge(module, inputs, config=None):
    return to_edge(torch.export.export(_module(module), tuple(inputs)), compile_config=config).exported_program()


def _call_nodes(ep):
    return [n for n in ep.graph.nodes if n.op == "call_function"]


def _run(model, inputs) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {f"input_{i}": x.numpy() for i, x in enumerate(inputs)})


def _mismatches(names, outputs, expected) -> list[str]:
    """``name: what differs`` for each output that differs from PyTorch's in dtype or value.

    Infinities and NaNs must sit at the same places; the finite rest must agree within 1e-4
    relative to the largest magnitude.
    """
    found = []
    for name, got, want in zip(names, outputs, expected):
        finite = np.isfinite(want)
        error = relative_error(np.where(finite, got, 0), np.where(finite, want, 0))
        if got.dtype != want.dtype:
            found.append(f"{name}: dtype {got.dtype} != {want.dtype}")
        elif not np.array_equal(got[~finite], want[~finite], equal_nan=True):
            found.append(f"{name}: infinities or NaNs differ")
        elif not error <= 1e-4:
            found.append(f"{name}: relative error {error:.2e}")
    return found


def _assert_lowers_and_matches(ep, inputs, expected, names, opsets=(MIN_OPSET, MAX_OPSET)):
    assert [f"{n.name} ({n.target})" for n in _call_nodes(ep) if not is_supported(n)] == []
    for opset in opsets:
        outputs = _run(lower_exported_program(ep, opset), inputs)
        assert len(outputs) == len(expected)
        assert _mismatches(names, outputs, expected) == [], f"opset {opset}"


@pytest.mark.parametrize("family", FAMILIES)
def test_operator_family_matches_eager(family):
    cases, config = FAMILIES[family]
    inputs = [x for c in cases for x in c.inputs]
    ep = _edge(Family(cases), inputs, config)
    missing = {op for c in cases for op in c.ops} - {str(n.target) for n in _call_nodes(ep)}
    assert not missing, f"no case exercises {sorted(missing)}"
    names, expected = [], []
    for case in cases:
        outs = torch_outputs(_module(case.module), case.inputs)
        names += [case.id] * len(outs)
        expected += outs
    _assert_lowers_and_matches(ep, inputs, expected, names)


UNSUPPORTED = [
    Case(
        "float64_conv",
        nn.Conv2d(2, 2, 3).double(),
        (randn(1, 2, 5, 5, dtype=torch.float64),),
        ("aten.convolution.default",),
    ),
    Case("erf_float64", torch.erf, (randn(3, dtype=torch.float64),), ("aten.erf.default",)),
    Case(
        "max_pool_indices",
        lambda x: F.max_pool2d(x, 2, return_indices=True)[1],
        (randn(1, 2, 4, 4),),
        ("aten.max_pool2d_with_indices.default",),
    ),
    Case(
        "avg_pool_divisor",
        lambda x: F.avg_pool2d(x, 2, divisor_override=3),
        (randn(1, 2, 4, 4),),
        ("aten.avg_pool2d.default",),
    ),
    Case("adaptive_pool_uneven", nn.AdaptiveAvgPool2d(3), (randn(1, 2, 7, 7),), ("aten._adaptive_avg_pool2d.default",)),
    Case("bitwise_and_int", operator.and_, (ints(3), ints(3)), ("aten.bitwise_and.Tensor",)),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in UNSUPPORTED])
def test_unsupported_arguments_are_rejected(case):
    ep = _edge(case.module, case.inputs)
    (target,) = case.ops
    nodes = [n for n in _call_nodes(ep) if str(n.target) == target]
    assert nodes and not any(is_supported(n) for n in nodes)
    with pytest.raises(ExportError, match="cannot translate"):
        lower_exported_program(ep)


def test_partition_of_a_graph_lowers_between_given_nodes():
    """Inputs may be intermediate nodes; only what the outputs need is translated, in the given order."""
    module = Fn(lambda x, y: torch.sigmoid(torch.relu(x + y) * 2).sum(-1))
    inputs = (randn(3, 4), randn(3, 4))
    ep = _edge(module, inputs)
    by_target = {str(n.target): n for n in _call_nodes(ep)}
    relu, mul = by_target["aten.relu.default"], by_target["aten.mul.Tensor"]
    sigmoid = by_target["aten.sigmoid.default"]
    constants = {
        s.arg.name: ep.constants[s.target]
        for s in ep.graph_signature.input_specs
        if s.kind == InputKind.CONSTANT_TENSOR
    }  # the folded literal 2
    model = lower_graph(ep.graph_module, [relu], [sigmoid, mul], constants)
    assert [n.op_type for n in model.graph.node].count("Add") == 0  # x + y stays outside
    x = torch.relu(inputs[0] + inputs[1])
    assert_matches(_run(model, [x]), [torch.sigmoid(x * 2).numpy(), (x * 2).numpy()])


def test_partition_reading_an_unlisted_value_is_an_error():
    ep = _edge(lambda x, y: x * y, (randn(2), randn(2)))
    (mul,) = _call_nodes(ep)
    with pytest.raises(ExportError, match="neither one of its inputs nor a constant"):
        lower_graph(ep.graph_module, [mul.args[0]], [mul], {})


def test_opset_outside_the_supported_range_is_an_error():
    ep = _edge(torch.relu, (randn(2),))
    with pytest.raises(ExportError, match="opset 16"):
        lower_exported_program(ep, opset=16)


@pytest.mark.parametrize("name", ["mlp", "cnn", "mobilenet_v2", "llama", "resnet18", "vit", "bert"])
def test_zoo_model_lowers_completely_and_matches_eager(name):
    model, inputs = load_model(name)
    expected = torch_outputs(model, inputs)
    _assert_lowers_and_matches(_edge(model, inputs), inputs, expected, [name] * len(expected), opsets=(MIN_OPSET,))
