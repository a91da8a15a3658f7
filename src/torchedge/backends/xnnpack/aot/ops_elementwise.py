"""Element-wise operators: binary arithmetic, unary math, clamps and activations, softmax.

They run in whichever layout their inputs already have (see `lowering`): a 4-D operand computed
in NHWC stays there. A clamp (relu, hardtanh, clamp) right after a convolution, a fully
connected node or add/sub/mul, whose result nothing else reads, becomes that node's
``output_min_max``, as ExecuTorch's ``FuseActivationPass`` does.
"""

from __future__ import annotations

import math

import torch

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.aot.lowering import NCHW, NHWC, Lowering, lowers, shape
from torchedge.backends.xnnpack.aot.shapes import any_dims

__all__: list[str] = []

aten = torch.ops.aten
_FUSES_CLAMP = {"XNNFullyConnected", "XNNConv2d", "XNNDepthwiseConv2d", "XNNAdd", "XNNSubtract", "XNNMultiply"}


def _numel(node) -> int:
    return math.prod(shape(node)) if isinstance(node, torch.fx.Node) else 1


def _layout(lw: Lowering, node: torch.fx.Node, operands) -> str:
    """NHWC when the result is 4-D, every operand is 4-D or a single element, and one of them
    was computed in NHWC only; NCHW otherwise."""
    if len(shape(node)) != 4:
        return NCHW
    if not all(len(shape(a)) == 4 or _numel(a) == 1 for a in operands):
        return NCHW
    return NHWC if any(len(shape(a)) == 4 and lw.preferred_layout(a) == NHWC for a in operands) else NCHW


def _operand(lw: Lowering, arg, layout: str) -> int:
    if len(shape(arg)) == 4:
        return lw.get(arg, layout)
    return lw.get(arg, NCHW)  # a single element: the same in both layouts


def _alpha_is_one(node, ep) -> bool:
    return node.kwargs.get("alpha", 1) == 1


def _tensor_operands(node, ep) -> bool:
    return all(isinstance(a, torch.fx.Node) for a in node.args[:2])


_BINARY = {aten.add.Tensor: "XNNAdd", aten.sub.Tensor: "XNNSubtract", aten.mul.Tensor: "XNNMultiply"}
_BINARY |= {aten.div.Tensor: "XNNDiv", aten.maximum.default: "XNNMaximum", aten.minimum.default: "XNNMinimum"}


def _binary_check(node, ep) -> bool:
    return _tensor_operands(node, ep) and _alpha_is_one(node, ep) and not node.kwargs.get("rounding_mode")


@lowers(*_BINARY, check=_binary_check, dynamic=any_dims)
def _binary(lw: Lowering, node: torch.fx.Node) -> None:
    a, b = node.args[:2]
    layout = _layout(lw, node, (a, b))
    first, second = _operand(lw, a, layout), _operand(lw, b, layout)
    out = lw.output(node, layout)
    lw.node(_BINARY[node.target], input1_id=first, input2_id=second, output_id=out, flags=0)


_UNARY = {
    aten.abs.default: "XNNAbs",
    aten.neg.default: "XNNNegate",
    aten.sqrt.default: "XNNSquareRoot",
    aten.rsqrt.default: "XNNReciprocalSquareRoot",
    aten.exp.default: "XNNExp",
    aten.log.default: "XNNLog",
    aten.floor.default: "XNNFloor",
    aten.ceil.default: "XNNCeiling",
    aten.sigmoid.default: "XNNSigmoid",
    aten.tanh.default: "XNNTanh",
    aten.hardswish.default: "XNNHardswish",
    aten.gelu.default: "XNNGelu",
    aten.sin.default: "XNNSin",
    aten.cos.default: "XNNCos",
}


def _unary_check(node, ep) -> bool:
    return node.target != aten.gelu.default or node.kwargs.get("approximate", "none") == "none"


@lowers(*_UNARY, check=_unary_check, dynamic=any_dims)
def _unary(lw: Lowering, node: torch.fx.Node) -> None:
    unary_node(lw, node, _UNARY[node.target])


def _square_check(node, ep) -> bool:
    return not isinstance(node.args[1], torch.fx.Node) and float(node.args[1]) == 2.0


@lowers(aten.pow.Tensor_Scalar, check=_square_check, dynamic=any_dims)
def _square(lw: Lowering, node: torch.fx.Node) -> None:
    unary_node(lw, node, "XNNSquare")


def unary_node(lw: Lowering, node: torch.fx.Node, kind: str, **params) -> None:
    """The XNNPACK node ``kind`` (with ``params``) of ``node``'s one input, in that input's layout."""
    (x,) = node.all_input_nodes
    layout = _layout(lw, node, (x,))
    source = lw.get(x, layout)
    out = lw.output(node, layout)
    lw.node(kind, **params, input_id=source, output_id=out, flags=0)


def _bounds(node: torch.fx.Node) -> tuple[float, float]:
    if node.target == aten.relu.default:
        return 0.0, math.inf
    if node.target == aten.hardtanh.default:
        low, high = (list(node.args[1:3]) + [-1.0, 1.0][len(node.args) - 1 :])[:2]
        return float(node.kwargs.get("min_val", low)), float(node.kwargs.get("max_val", high))
    args = list(node.args[1:3]) + [None] * (3 - len(node.args))
    low, high = node.kwargs.get("min", args[0]), node.kwargs.get("max", args[1])
    return (-math.inf if low is None else float(low)), (math.inf if high is None else float(high))


def _clamp_check(node, ep) -> bool:
    if node.target != aten.clamp.default:
        return True
    return all(not isinstance(a, torch.fx.Node) for a in (*node.args[1:], *node.kwargs.values()))


def _try_fuse(lw: Lowering, node: torch.fx.Node, bounds: tuple[float, float]) -> bool:
    (x,) = node.all_input_nodes
    known = lw.layouts(x)
    if len(x.users) != 1 or len(known) != 1:
        return False
    xnode = lw.producers.get(next(iter(known.values())))
    if xnode is None or type(xnode.xnode_union).__name__ not in _FUSES_CLAMP:
        return False
    low, high = bounds
    if xnode.output_min_max is not None:
        low, high = max(low, xnode.output_min_max.output_min), min(high, xnode.output_min_max.output_max)
        if low > high:
            return False
        xnode.output_min_max.output_min, xnode.output_min_max.output_max = low, high
    else:
        xnode.output_min_max = s.OutputMinMax(low, high)
    lw.alias(node, x)
    return True


@lowers(aten.relu.default, aten.hardtanh.default, aten.clamp.default, check=_clamp_check, dynamic=any_dims)
def _clamp(lw: Lowering, node: torch.fx.Node) -> None:
    bounds = _bounds(node)
    if _try_fuse(lw, node, bounds):
        return
    unary_node(lw, node, "XNNClamp", output_min_max=bounds)


@lowers(aten.leaky_relu.default, dynamic=any_dims)
def _leaky_relu(lw: Lowering, node: torch.fx.Node) -> None:
    slope = float(node.args[1]) if len(node.args) > 1 else float(node.kwargs.get("negative_slope", 0.01))
    unary_node(lw, node, "XNNLeakyReLU", negative_slope=slope)


def _elu_check(node, ep) -> bool:
    scale = node.args[2] if len(node.args) > 2 else node.kwargs.get("scale", 1)
    input_scale = node.args[3] if len(node.args) > 3 else node.kwargs.get("input_scale", 1)
    return scale == 1 and input_scale == 1


@lowers(aten.elu.default, check=_elu_check, dynamic=any_dims)
def _elu(lw: Lowering, node: torch.fx.Node) -> None:
    alpha = float(node.args[1]) if len(node.args) > 1 else float(node.kwargs.get("alpha", 1.0))
    unary_node(lw, node, "XNNELU", alpha=alpha)


def _softmax_check(node, ep) -> bool:
    rank = len(shape(node))
    return node.args[1] in (-1, rank - 1) and not node.args[2]


@lowers(aten._softmax.default, check=_softmax_check, dynamic=any_dims)
def _softmax(lw: Lowering, node: torch.fx.Node) -> None:
    source = lw.get(node.args[0], NCHW)
    out = lw.output(node)
    lw.node("XNNSoftmax", input_id=source, output_id=out, flags=0)
