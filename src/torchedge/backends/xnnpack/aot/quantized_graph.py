"""What quantized patterns look like in an Edge graph, for the XNNPACK lowering: the
``quantized_decomposed`` operators (by name), the parameters a quantize carries, fused clamps,
dynamic activations, and quantized weights and biases as XNNPACK values."""

from __future__ import annotations

import math
import operator

import numpy as np
import torch

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.aot.builder import INVALID
from torchedge.backends.xnnpack.aot.lowering import QUANT_HOOKS, QUANTIZED_INPUT, Lowering, constant_placeholder

aten = torch.ops.aten
D = s.XNNDatatype

NAMESPACE = "quantized_decomposed"
# By name: the operators exist once torch.ao's or torchao's quantization library is imported,
# which may happen after this module is.
Q = f"{NAMESPACE}.quantize_per_tensor.default"
DQ = f"{NAMESPACE}.dequantize_per_tensor.default"
DQ_CHANNEL = f"{NAMESPACE}.dequantize_per_channel.default"
Q_DYNAMIC = f"{NAMESPACE}.quantize_per_tensor.tensor"
DQ_DYNAMIC = f"{NAMESPACE}.dequantize_per_tensor.tensor"
CHOOSE = f"{NAMESPACE}.choose_qparams.tensor"
QUANT_OPS = (Q, DQ, DQ_CHANNEL, Q_DYNAMIC, DQ_DYNAMIC, CHOOSE)
CLAMPS = {aten.relu.default, aten.hardtanh.default, aten.clamp.default}
FUSES_CLAMP = {aten.convolution.default, aten.addmm.default, aten.mm.default, aten.add.Tensor}
INT8_RANGE = (-128, 127)


def is_call(node, *targets) -> bool:
    """Whether ``node`` calls one of ``targets`` (operators, or quantized_decomposed names)."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    target = node.target
    return target in targets or (isinstance(target, torch._ops.OpOverload) and str(target) in targets)


def call_args(node: torch.fx.Node, count: int) -> list:
    """The first ``count`` arguments, keyword ones included (by schema order)."""
    values = list(node.args)
    schema = getattr(node.target, "_schema", None)
    if schema is not None:
        for argument in schema.arguments[len(values) : count]:
            values.append(node.kwargs.get(argument.name, argument.default_value))
    return values[:count]


# ----------------------------------------------------------------------------
# Which nodes belong to quantized patterns, and their results' parameters


def static_params_node(node: torch.fx.Node):
    """The static quantize reading ``node``'s result (through max pooling's getitem and a relu
    or clamp a producer fuses), or None."""
    current = node
    while True:
        users = list(current.users)
        if len(users) == 1 and users[0].target is operator.getitem and users[0].args[1] == 0:
            current = users[0]
        elif len(users) == 1 and users[0].target in CLAMPS and current.target in FUSES_CLAMP:
            current = users[0]
        else:
            break
    if not users or not all(is_call(u, Q) for u in users):
        return None
    first = quantize_params(users[0])
    if first is None or any(quantize_params(u) != first for u in users[1:]):
        return None
    return users[0]


def quantize_params(node: torch.fx.Node):
    """(scale, zero point) of a static int8 quantize or dequantize node, else None."""
    x, scale, zero_point, qmin, qmax, dtype = call_args(node, 6)
    if not isinstance(scale, (int, float)) or not isinstance(zero_point, int) or dtype != torch.int8:
        return None
    if not (-128 <= qmin <= qmax <= 127) or not (math.isfinite(scale) and scale > 0):
        return None
    return float(scale), int(zero_point)


def output_params(node: torch.fx.Node, ep):
    if not QUANT_HOOKS.in_domain(node, ep) or is_call(node, *QUANT_OPS):
        return None
    quantize = static_params_node(node)
    if quantize is None:
        return None
    scale, zero_point = quantize_params(quantize)
    return s.PerTensorQuant(scale=scale, zero_point=zero_point)


def activation_params(node) -> tuple[float, int] | None:
    """The parameters of a static dequantized activation: dq of a q with the same parameters, or
    dq of a delegate's int8 input (the partition cut there at a quantize: the dq gives its meaning)."""
    params = dequantize_params(node)
    if params is None:
        return None
    source = node.args[0]
    if is_call(source, Q):
        return params if quantize_params(source) == params else None
    return params if isinstance(source, torch.fx.Node) and source.meta.get(QUANTIZED_INPUT) else None


def dequantize_params(node) -> tuple[float, int] | None:
    """(scale, zero point) of a static dequantize of int8 over the whole int8 range, else None."""
    if not is_call(node, DQ):
        return None
    _, _, _, qmin, qmax, _ = call_args(node, 6)
    return quantize_params(node) if (qmin, qmax) == INT8_RANGE else None


def is_dynamic_activation(node) -> bool:
    """A dequantized dynamically quantized activation: choose_qparams -> q -> dq."""
    if not is_call(node, DQ_DYNAMIC) or not is_call(node.args[0], Q_DYNAMIC):
        return False
    return dynamic_quantize_ok(node.args[0])


def dynamic_quantize_ok(q: torch.fx.Node) -> bool:
    x, scale, zero_point, qmin, qmax, dtype = call_args(q, 6)
    if dtype != torch.int8 or (qmin, qmax) != INT8_RANGE:
        return False
    if not (is_call(scale, operator.getitem) and is_call(zero_point, operator.getitem)):
        return False
    choose = scale.args[0]
    if not is_call(choose, CHOOSE) or zero_point.args[0] is not choose or (scale.args[1], zero_point.args[1]) != (0, 1):
        return False
    if (
        choose.args[0] is not x
        or tuple(call_args(choose, 5)[1:3]) != INT8_RANGE
        or call_args(choose, 5)[4] != torch.int8
    ):
        return False
    val = x.meta.get("val")  # rows for a linear layer, images for a convolution (their checks say which)
    return isinstance(val, torch.Tensor) and val.dtype == torch.float32 and val.dim() in (2, 4)


# ----------------------------------------------------------------------------
# Weights and biases


class QuantizedWeight:
    """An int8 weight read through its dequantize (and a [1, 0] permute for linear layers)."""

    def __init__(self, data: np.ndarray, scale, per_channel: bool):
        self.data = data  # int8, output channels first
        self.scale = scale  # float, or a float32 tensor per output channel
        self.per_channel = per_channel


def quantized_weight(node, ep, transposed: bool) -> QuantizedWeight | None:
    if transposed:
        if not is_call(node, aten.permute_copy.default) or [int(d) for d in node.args[1]] != [1, 0]:
            return None
        node = node.args[0]
    if is_call(node, DQ):
        params = quantize_params(node)
        tensor = constant_placeholder(node.args[0], ep)
        if params is None or tensor is None or tensor.dtype != torch.int8 or params[1] != 0:
            return None
        return QuantizedWeight(tensor.numpy(), params[0], per_channel=False)
    if is_call(node, DQ_CHANNEL):
        _, scales, zero_points, axis, qmin, qmax, dtype = call_args(node, 7)
        tensor = constant_placeholder(node.args[0], ep)
        scales, zero_points = constant_placeholder(scales, ep), constant_placeholder(zero_points, ep)
        if tensor is None or scales is None or zero_points is None or tensor.dtype != torch.int8:
            return None
        if axis != 0 or dtype != torch.int8 or bool(torch.any(zero_points != 0)) or scales.numel() != tensor.shape[0]:
            return None
        return QuantizedWeight(tensor.numpy(), scales.detach().to(torch.float32).reshape(-1), per_channel=True)
    return None


def filter_value(lw: Lowering, weight: QuantizedWeight, data: np.ndarray, channel_dim: int = 0) -> int:
    raw = np.ascontiguousarray(data, dtype=np.int8).tobytes()
    if weight.per_channel:
        params = channel_params(lw, weight.scale, channel_dim)
        return lw.builder.quantized_value(data.shape, D.xnn_datatype_qcint8, params, raw)
    per_tensor = s.PerTensorQuant(scale=float(weight.scale), zero_point=0)
    return lw.builder.quantized_value(data.shape, D.xnn_datatype_qint8, per_tensor, raw)


def channel_params(lw: Lowering, scales: torch.Tensor, channel_dim: int = 0) -> s.PerChannelQuant:
    data = scales.detach().to(torch.float32).contiguous().numpy().tobytes()
    index = lw.builder.store(data)
    return s.PerChannelQuant(scale=[], channel_dim=channel_dim, scale_buffer_idx=index, num_scales=int(scales.numel()))


def bias_ok(bias, ep, out_features: int) -> bool:
    if bias is None:
        return True
    tensor = constant_placeholder(bias, ep)
    return tensor is not None and tensor.dtype == torch.float32 and tensor.numel() == out_features


def float_bias(lw: Lowering, bias) -> int:
    if bias is None:
        return INVALID
    data = constant_placeholder(bias, lw.ep).detach().reshape(-1).to(torch.float32).contiguous().numpy()
    return lw.builder.value(data.shape, data)


def bias_value(lw: Lowering, bias, weight: QuantizedWeight, input_scale: float | None) -> int:
    """The bias: qint32/qcint32 (scale input_scale * weight_scale) for static quantization,
    float32 for dynamic (``input_scale`` None)."""
    if bias is None:
        return INVALID
    if input_scale is None:
        return float_bias(lw, bias)
    tensor = constant_placeholder(bias, lw.ep).detach().reshape(-1).contiguous()
    qd = getattr(torch.ops, NAMESPACE)
    low, high = -(2**31), 2**31 - 1
    params: s.PerChannelQuant | s.PerTensorQuant
    if weight.per_channel:
        scales = weight.scale * float(input_scale)
        zeros = torch.zeros(scales.shape, dtype=torch.int64)
        quantized = qd.quantize_per_channel.default(tensor, scales, zeros, 0, low, high, torch.int32)
        params = channel_params(lw, scales)
        datatype = D.xnn_datatype_qcint32
    else:
        scale = float(weight.scale) * float(input_scale)
        quantized = qd.quantize_per_tensor.default(tensor, scale, 0, low, high, torch.int32)
        params, datatype = s.PerTensorQuant(scale=scale, zero_point=0), D.xnn_datatype_qint32
    raw = quantized.to(torch.int32).contiguous().numpy().tobytes()
    return lw.builder.quantized_value(tensor.shape, datatype, params, raw)


# ----------------------------------------------------------------------------
# quantize / dequantize / choose_qparams
