"""Quantized patterns: ``quantized_decomposed`` quantize/dequantize nodes around operators.

PT2E (``XNNPACKQuantizer``) leaves a float graph with ``quantize_per_tensor`` /
``dequantize_per_tensor`` pairs around each operator and ``dequantize_per_tensor`` /
``dequantize_per_channel`` over int8 weights. ExecuTorch's XNNPACK lowering, written here the
same way, turns them into quantized values rather than nodes:

- a static pair ``q -> dq`` is one ``qint8`` value (``PerTensorQuant``); an operator whose
  inputs are dequantized and whose result is quantized (possibly through a fused relu/clamp, or
  max pooling's ``getitem``) computes in ``qint8`` and its result value carries the parameters
  of the quantize that follows. A quantize of a float value is an ``XNNConvert`` to ``qint8``;
  a dequantized delegate output an ``XNNConvert`` back to float32.
- weights: ``qint8`` (per tensor) or ``qcint8`` (per output channel, ``PerChannelQuant`` with its
  float32 scales in the constant data); biases ``qint32`` / ``qcint32`` with scale
  ``input_scale * weight_scale``, quantized as ExecuTorch does (``quantize_per_tensor`` /
  ``quantize_per_channel`` to int32).
- dynamic activations (``choose_qparams.tensor -> quantize_per_tensor.tensor ->
  dequantize_per_tensor.tensor`` in front of a linear layer) become an ``XNNConvert`` to
  ``qdint8`` (``PerTokenDynamicQuant``, one non-batch dim, as ExecuTorch writes per-tensor dynamic
  quantization); the fully connected node then has a ``qcint8`` filter, a float32 bias and a
  float32 result.

Anything else touching these operators stays outside the delegate.
"""

from __future__ import annotations

import operator

import torch

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.aot import ops_elementwise, ops_nn, ops_shape
from torchedge.backends.xnnpack.aot.lowering import (
    NCHW,
    NHWC,
    QUANT_HOOKS,
    Lowering,
    is_supported,
    lowers_quantized,
    shape,
)
from torchedge.backends.xnnpack.aot.quantized_graph import (
    CHOOSE,
    CLAMPS,
    DQ,
    DQ_CHANNEL,
    DQ_DYNAMIC,
    FUSES_CLAMP,
    INT8_RANGE,
    Q_DYNAMIC,
    QUANT_OPS,
    D,
    Q,
    activation_params,
    aten,
    bias_ok,
    bias_value,
    call_args,
    dequantize_params,
    dynamic_quantize_ok,
    filter_value,
    is_call,
    is_dynamic_activation,
    output_params,
    quantize_params,
    quantized_weight,
    static_params_node,
)

__all__: list[str] = []


def _in_domain(node: torch.fx.Node, ep) -> bool:
    if node.op != "call_function":
        return False
    if is_call(node, *QUANT_OPS):
        return True
    if node.target is operator.getitem and is_call(node.args[0], CHOOSE):
        return True
    if any(is_call(arg, *QUANT_OPS) for arg in node.all_input_nodes):
        return True
    return static_params_node(node) is not None


def _computes_in_float(node: torch.fx.Node, ep) -> bool:
    """An operator without a quantized translation that takes it, between static dequantized
    activations (or float values) and a quantize: it runs in float32 on converted inputs, as
    ExecuTorch's lowering runs a pad."""
    if is_call(node, *QUANT_OPS) or node.target is operator.getitem:
        return False
    return all(
        activation_params(x) is not None and is_supported(x, ep) for x in node.all_input_nodes if is_call(x, *QUANT_OPS)
    )


def _holds_dynamic(node: torch.fx.Node, ep) -> bool:
    """Dynamic activations and the linear layers reading them: XNNPACK quantizes per call."""
    if is_call(node, CHOOSE, Q_DYNAMIC, DQ_DYNAMIC):
        return True
    if node.target is operator.getitem:
        return is_call(node.args[0], CHOOSE)
    if is_call(node, aten.addmm.default, aten.mm.default):
        return is_dynamic_activation(node.args[1] if node.target == aten.addmm.default else node.args[0])
    return False


QUANT_HOOKS.in_domain = _in_domain
QUANT_HOOKS.output_params = output_params
QUANT_HOOKS.computes_in_float = _computes_in_float
QUANT_HOOKS.dynamic = _holds_dynamic
QUANT_HOOKS.dequantize_params = dequantize_params


def _users_supported(node, ep) -> bool:
    return bool(node.users) and all(is_supported(u, ep) for u in node.users)


def _q_check(node, ep) -> bool:
    x = node.args[0]
    val = getattr(x, "meta", {}).get("val")
    if not isinstance(val, torch.Tensor) or val.dtype != torch.float32 or val.dim() > 6 or val.numel() == 0:
        return False
    if quantize_params(node) is None or tuple(call_args(node, 6)[3:5]) != INT8_RANGE:
        return False
    return all(u.op == "output" or activation_params(u) is not None for u in node.users)  # (int8 out of a delegate)


@lowers_quantized(Q, check=_q_check)
def _quantize(lw: Lowering, node: torch.fx.Node) -> None:
    x = node.args[0]
    known = lw.layouts(x)
    scale, zero_point = quantize_params(node)
    params = s.PerTensorQuant(scale=scale, zero_point=zero_point)
    if known and all(lw.builder.quantization(v) == params for v in known.values()):
        lw.alias(node, x)  # the producer computed it quantized
        return
    layout = lw.preferred_layout(x) if known else NCHW
    source = lw.get(x, layout)
    dims = lw.builder.tensor(source).dims
    out = lw.builder.quantized_value(dims, D.xnn_datatype_qint8, params)
    lw.node("XNNConvert", input_id=source, output_id=out, flags=0)
    lw.values[node] = {layout: out}


def _dq_check(node, ep) -> bool:
    if activation_params(node) is not None:
        return node.args[0].op == "placeholder" or is_supported(node.args[0], ep)
    # A weight: read by the operators that use it.
    return _users_supported(node, ep)


def _dq_channel_check(node, ep) -> bool:
    return _users_supported(node, ep)


@lowers_quantized(
    DQ, DQ_DYNAMIC, check=lambda node, ep: _dq_check(node, ep) if is_call(node, DQ) else _dynamic_dq_check(node, ep)
)
def _dequantize(lw: Lowering, node: torch.fx.Node) -> None:
    if is_call(node, DQ_DYNAMIC) or activation_params(node) is not None:
        lw.alias(node, node.args[0])
    # else: a weight, read by its users


@lowers_quantized(DQ_CHANNEL, check=_dq_channel_check)
def _weight_only(lw: Lowering, node: torch.fx.Node) -> None:
    return  # a weight, read by its users


def _dynamic_dq_check(node, ep) -> bool:
    return is_dynamic_activation(node) and _users_supported(node, ep)


def _dynamic_q_check(node, ep) -> bool:
    return dynamic_quantize_ok(node) and all(is_call(u, DQ_DYNAMIC) and _dynamic_dq_check(u, ep) for u in node.users)


@lowers_quantized(Q_DYNAMIC, check=_dynamic_q_check)
def _quantize_dynamic(lw: Lowering, node: torch.fx.Node) -> None:
    """Rows of a linear layer's input, or (4-D) a convolution's images channels-last, each
    quantized with parameters of its own (per tensor for one row or image, as ExecuTorch writes it)."""
    layout = NHWC if len(shape(node)) == 4 else NCHW
    source = lw.get(node.args[0], layout)
    dims = lw.builder.tensor(source).dims
    params = s.PerTokenDynamicQuant(num_nonbatch_dims=len(dims) - 1)
    out = lw.builder.quantized_value(dims, D.xnn_datatype_qdint8, params)
    lw.node("XNNConvert", input_id=source, output_id=out, flags=0)
    lw.values[node] = {layout: out}


def _choose_check(node, ep) -> bool:
    quantizes = [u for g in node.users for u in g.users if is_call(u, Q_DYNAMIC)]
    return bool(quantizes) and all(is_supported(q, ep) for q in quantizes)


@lowers_quantized(CHOOSE, check=_choose_check)
def _choose(lw: Lowering, node: torch.fx.Node) -> None:
    return  # XNNPACK computes the parameters in the convert


def _getitem_check(node, ep) -> bool:
    source = node.args[0]
    if is_call(source, CHOOSE):
        return is_supported(source, ep)
    return node.args[1] == 0 and is_supported(source, ep)


@lowers_quantized(operator.getitem, check=_getitem_check)
def _getitem(lw: Lowering, node: torch.fx.Node) -> None:
    if not is_call(node.args[0], CHOOSE):
        lw.alias(node, node.args[0])


def _permute_check(node, ep) -> bool:
    return quantized_weight(node, ep, transposed=True) is not None and _users_supported(node, ep)


@lowers_quantized(aten.permute_copy.default, check=_permute_check)
def _weight_permute(lw: Lowering, node: torch.fx.Node) -> None:
    return  # a linear layer's weight, read by it


# ----------------------------------------------------------------------------
# Operators


def static_pattern(node, ep, activations) -> bool:
    """Static quantization: every activation input dequantized (in the delegate too), the result
    quantized."""
    if output_params(node, ep) is None:
        return False
    return all(activation_params(a) is not None and is_supported(a, ep) for a in activations)


def _linear_check(node, ep) -> bool:
    if node.target == aten.addmm.default:
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            return False
        bias, x, weight = node.args[:3]
    else:
        bias, (x, weight) = None, node.args[:2]
    w = quantized_weight(weight, ep, transposed=True)
    if w is None or len(shape(x)) != 2 or not bias_ok(bias, ep, w.data.shape[0]):
        return False
    if is_dynamic_activation(x):
        return w.per_channel and output_params(node, ep) is None and dynamic_quantize_ok(x.args[0])
    return static_pattern(node, ep, [x])


@lowers_quantized(aten.addmm.default, aten.mm.default, check=_linear_check)
def _linear(lw: Lowering, node: torch.fx.Node) -> None:
    if node.target == aten.addmm.default:
        bias, x, weight = node.args[:3]
    else:
        bias, (x, weight) = None, node.args[:2]
    w = quantized_weight(weight, lw.ep, transposed=True)
    activation = activation_params(x)
    filter_id = filter_value(lw, w, w.data)
    bias_id = bias_value(lw, bias, w, None if activation is None else activation[0])
    source = lw.get(x, NCHW)
    out = lw.output(node)
    lw.node("XNNFullyConnected", input1_id=source, filter_id=filter_id, bias_id=bias_id, output_id=out, flags=0)


def _conv_check(node, ep) -> bool:
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = node.args[:9]
    if transposed or len(shape(x)) != 4:
        return False
    w = quantized_weight(weight, ep, transposed=False)
    if w is None or w.data.ndim != 4 or not bias_ok(bias, ep, w.data.shape[0]) or w.data.shape[0] % int(groups):
        return False
    if is_dynamic_activation(x):  # one group: XNNPACK's dynamically quantized convolution
        return int(groups) == 1 and w.per_channel and output_params(node, ep) is None and dynamic_quantize_ok(x.args[0])
    return static_pattern(node, ep, [x])


@lowers_quantized(aten.convolution.default, check=_conv_check)
def _convolution(lw: Lowering, node: torch.fx.Node) -> None:
    x, weight, bias, stride, padding, dilation, _, _, groups = node.args[:9]
    w = quantized_weight(weight, lw.ep, transposed=False)
    out_channels, group_in, kh, kw = w.data.shape
    groups = int(groups)
    depthwise = group_in == 1 and groups > 1
    if depthwise:  # [1, kh, kw, out], its channels last
        filter_id = filter_value(lw, w, w.data.reshape(1, out_channels, kh, kw).transpose(0, 2, 3, 1), channel_dim=3)
    else:  # OHWI
        filter_id = filter_value(lw, w, w.data.transpose(0, 2, 3, 1))
    activation = activation_params(x)  # None: dynamic, a float bias
    bias_id = bias_value(lw, bias, w, None if activation is None else activation[0])
    geometry = (padding, stride, dilation)
    ops_nn.conv_node(lw, node, x, (filter_id, bias_id), (kh, kw), geometry, (groups, group_in, out_channels // groups))


def _add_check(node, ep) -> bool:
    a, b = node.args[:2]
    if node.kwargs.get("alpha", 1) != 1 or not isinstance(a, torch.fx.Node) or not isinstance(b, torch.fx.Node):
        return False
    if shape(a) != shape(b):  # no broadcasting
        return False
    return static_pattern(node, ep, [a, b])


lowers_quantized(aten.add.Tensor, check=_add_check)(ops_elementwise._binary)


def _same_params(node, ep) -> bool:
    """Operators XNNPACK runs on qint8 only with the same parameters in and out."""
    x = node.args[0]
    params = output_params(node, ep)
    return (
        static_pattern(node, ep, [x])
        and params is not None
        and (params.scale, params.zero_point) == activation_params(x)
    )


def _max_pool_check(node, ep) -> bool:
    return ops_nn._max_pool_check(node, ep) and _same_params(node, ep)


lowers_quantized(aten.max_pool2d_with_indices.default, check=_max_pool_check)(ops_nn._max_pool)


def _view_check(node, ep) -> bool:
    return _same_params(node, ep)


lowers_quantized(aten.view_copy.default, check=_view_check)(ops_shape._reshape)


def _clamp_check(node, ep) -> bool:
    """A relu or clamp its quantized producer fuses (its result then carries the parameters of
    the quantize after the clamp), or one between a dequantize and a quantize of the same
    parameters (a ``qint8`` clamp of its own)."""
    (x,) = node.all_input_nodes
    if not ops_elementwise._clamp_check(node, ep):
        return False
    if activation_params(x) is not None:
        return _same_params(node, ep)
    if len(x.users) != 1 or x.target not in FUSES_CLAMP:
        return False
    return output_params(node, ep) is not None and is_supported(x, ep)


@lowers_quantized(*CLAMPS, check=_clamp_check)
def _clamp(lw: Lowering, node: torch.fx.Node) -> None:
    if activation_params(node.args[0]) is not None:
        ops_elementwise.unary_node(lw, node, "XNNClamp", output_min_max=ops_elementwise._bounds(node))
    else:
        ops_elementwise._clamp(lw, node)


def _mean_check(node, ep) -> bool:
    return ops_nn._mean_check(node, ep) and static_pattern(node, ep, [node.args[0]])


lowers_quantized(aten.mean.dim, check=_mean_check)(ops_nn._mean)
