"""torchao's int8 dynamic activations with 4-bit group-wise weights (8da4w) or int8 per-channel
weights (8da8w) lowered to XNNPACK: a ``qdint8`` convert of the activation and a ``qbint4`` (or
``qcint8``) fully connected filter, as ExecuTorch writes them. Registered after `ops_quantized`'s
patterns, which a node that is not part of such a layer falls back to."""

from __future__ import annotations

import numpy as np
import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.aot.lowering import (
    _QUANTIZED,
    NCHW,
    QUANT_HOOKS,
    SYM_SIZE,
    Lowering,
    constant_placeholder,
    is_supported,
    lowers_quantized,
    shape,
)
from torchedge.backends.xnnpack.aot.quantized_graph import (
    D,
    QuantizedWeight,
    bias_ok,
    filter_value,
    float_bias,
    is_call,
    output_params,
)
from torchedge.backends.xnnpack.aot.shapes import dynamic_dims, reshape_dims, upper_bound

__all__: list[str] = []

aten = torch.ops.aten

# ----------------------------------------------------------------------------
# torchao's int8 dynamic activations with 4-bit group-wise weights (8da4w)
#
# torchedge's ``to_edge`` decomposes torchao's ``choose_qparams_affine`` / ``quantize_affine`` /
# ``dequantize_affine`` into ATen: the weight becomes ``(float(W_int4) - float(zp)) * scale``
# viewed [out, in] and transposed, the activation a chain from a float value ``r`` (amin/amax
# per row, round, clamp to int8, back to float) ending in the linear layer's input. ExecuTorch
# lowers the same model to a ``qdint8`` convert of ``r`` and a ``qbint4`` filter
# (``PerChannelGroupQuant``: bfloat16 scales per output channel and group, values + 8 packed two
# a byte, low nibble first); so does this. A weight with one scale a row and values outside int4's
# range (8da8w's int8 per output channel) becomes a ``qcint8`` filter with float32 scales.

_CONE_OPS = {
    aten.view_copy.default,
    aten.amin.default,
    aten.amax.default,
    aten.full_like.default,
    aten.minimum.default,
    aten.maximum.default,
    aten.sub.Tensor,
    aten.div.Tensor,
    aten.clamp.default,
    aten.round.default,
    aten._to_copy.default,
    aten.reciprocal.default,
    aten.mul.Tensor,
    aten.add.Tensor,
}
_INT4_TARGETS = _CONE_OPS | {aten.permute_copy.default, aten.addmm.default, aten.mm.default}


class _Int4Weight:
    def __init__(self, data: np.ndarray, scale: torch.Tensor, group_size: int):
        self.data = data  # int8 in [-8, 7], [out, in]
        self.scale = scale  # [out, in / group_size]
        self.group_size = group_size


def _to_float_of_constant(node, ep) -> torch.Tensor | None:
    if not is_call(node, aten._to_copy.default) or node.kwargs.get("dtype") != torch.float32:
        return None
    return constant_placeholder(node.args[0], ep)


def _int4_weight(node, ep) -> tuple[_Int4Weight | QuantizedWeight, list] | None:
    """The 4-bit group-wise (or int8 per-channel) weight under a linear layer's
    ``permute(view(mul(sub(...), scale)))`` and the nodes that compute it."""
    if not is_call(node, aten.permute_copy.default) or [int(d) for d in node.args[1]] != [1, 0]:
        return None
    view = node.args[0]
    if not is_call(view, aten.view_copy.default) or len(shape(view)) != 2:
        return None
    out_features, in_features = shape(view)
    mul = view.args[0]
    if not is_call(mul, aten.mul.Tensor) or not all(isinstance(a, torch.fx.Node) for a in mul.args[:2]):
        return None
    first, second = mul.args[:2]
    scale = constant_placeholder(second, ep)
    values = first
    if scale is None:
        scale, values = constant_placeholder(first, ep), second
    if scale is None or not scale.dtype.is_floating_point:
        return None
    nodes = [node, view, mul]
    zero = None
    if is_call(values, aten.sub.Tensor) and len(values.args) == 2 and values.kwargs.get("alpha", 1) == 1:
        nodes.append(values)
        zero = _to_float_of_constant(values.args[1], ep)
        if zero is None or bool(torch.any(zero != 0)):
            return None
        nodes.append(values.args[1])
        values = values.args[0]
    data = _to_float_of_constant(values, ep)
    if data is None or data.dtype != torch.int8 or data.dim() not in (2, 3):
        return None
    nodes.append(values)
    if any(len(n.users) != 1 for n in nodes[1:]) or len(node.users) != 1:
        return None
    if data.dim() == 2:  # one scale a row: [out, in] with scales [out, 1]
        if tuple(data.shape) != (out_features, in_features) or tuple(scale.shape) != (out_features, 1):
            return None
        if bool(torch.any(data < -8)) or bool(torch.any(data > 7)):  # int8 per channel (8da8w)
            return QuantizedWeight(data.numpy(), scale.detach().to(torch.float32).reshape(-1), per_channel=True), nodes
        data, scale = data.reshape(out_features, 1, in_features), scale.reshape(out_features, 1, 1)  # one 4-bit group
    out, groups, group_size = data.shape
    if (out, groups * group_size) != (out_features, in_features) or tuple(scale.shape) != (out, groups, 1):
        return None
    if zero is not None and zero.numel() not in (1, out * groups):
        return None
    if group_size % 32 or bool(torch.any(data < -8)) or bool(torch.any(data > 7)):
        return None
    weight = _Int4Weight(data.reshape(out, in_features).numpy(), scale.reshape(out, groups), group_size)
    return weight, nodes


def _activation_cone(x, ep, order: dict) -> tuple[torch.fx.Node, list] | None:
    """(r, the nodes from r to ``x``) when ``x`` is torchao's per-row dynamic int8 quantization
    of ``r`` dequantized again (see above)."""
    ancestors: list = []
    seen: set = set()
    stack = [x]
    amin = None
    while stack:
        node = stack.pop()
        if node in seen or not is_call(node, *_CONE_OPS):
            continue
        seen.add(node)
        ancestors.append(node)
        if node.target == aten.amin.default:
            amin = node
        stack.extend(node.all_input_nodes)
    if amin is None:
        return None
    root = amin.args[0]  # r: through the quantization's own views, which keep the rows
    while is_call(root, aten.view_copy.default) and shape(root.args[0])[-1:] == shape(x)[-1:]:
        root = root.args[0]
    cone: set = set()  # the ancestors of x that descend from root
    for node in sorted(ancestors, key=order.__getitem__):
        if node is not root and any(a is root or a in cone for a in node.all_input_nodes):
            cone.add(node)
    if x not in cone:
        return None
    for node in cone:
        for arg in node.all_input_nodes:
            if arg is root or arg in cone or arg.target is SYM_SIZE:  # a view's dynamic size
                continue
            if constant_placeholder(arg, ep) is None:
                return None
        if node is not x and any(u not in cone for u in node.users):
            return None
    if len(x.users) != 1 or not {aten.amin.default, aten.amax.default, aten.round.default} <= {n.target for n in cone}:
        return None
    if not any(n.target == aten._to_copy.default and n.kwargs.get("dtype") == torch.int8 for n in cone):
        return None
    val = root.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype != torch.float32 or not val.dim():
        return None
    x_val = x.meta.get("val")
    if len(dynamic_dims(x)) > 1 or val.dim() > 6 or upper_bound(val.shape[-1]) != shape(x)[-1]:
        return None
    if not statically_known_true(val.numel() == x_val.numel()):
        return None  # r's rows must be x's rows (a [1, tokens, dim] input viewed [tokens, dim])
    return root, sorted(cone, key=order.__getitem__)


_ROLES_ATTRIBUTE = "_torchedge_xnnpack_int4_roles"


def _int4_roles(graph, ep) -> dict:
    """{node: (role, linear node, details)} for the nodes of 8da4w linear layers in ``graph``
    (computed once per graph and node count, kept on the graph)."""
    count = len(graph.nodes)
    cached = getattr(graph, _ROLES_ATTRIBUTE, None)
    if cached is not None and cached[0] == count:
        return cached[1]
    roles: dict = {}
    order = {node: index for index, node in enumerate(graph.nodes)}
    for node in graph.nodes:
        if not is_call(node, aten.addmm.default, aten.mm.default):
            continue
        x, weight = (node.args[1], node.args[2]) if node.target == aten.addmm.default else node.args[:2]
        if not isinstance(x, torch.fx.Node) or len(shape(x)) != 2:
            continue
        found = _int4_weight(weight, ep)
        cone = _activation_cone(x, ep, order) if found is not None else None
        if found is None or cone is None:
            continue
        for part in found[1]:
            roles[part] = ("weight", node, None)
        for part in cone[1]:
            roles[part] = ("activation", node, cone[0])
        roles[node] = ("linear", node, found[0])
    setattr(graph, _ROLES_ATTRIBUTE, (count, roles))
    return roles


def _int4_role(node, ep):
    return _int4_roles(node.graph, ep).get(node)


def _int4_check(node, ep) -> bool:
    role = _int4_role(node, ep)
    if role is None:
        return False
    linear = role[1]
    if role[0] == "activation" and role[2].op == "call_function" and _int4_role(role[2], ep) is not None:
        return False  # the cone's root must be computed in float
    if role[0] != "linear":
        return is_supported(linear, ep)
    bias = linear.args[0] if linear.target == aten.addmm.default else None
    if linear.target == aten.addmm.default and (
        linear.kwargs.get("beta", 1) != 1 or linear.kwargs.get("alpha", 1) != 1
    ):
        return False
    return bias_ok(bias, ep, shape(linear)[-1]) and output_params(linear, ep) is None


def _pack_int4(data: np.ndarray) -> bytes:
    values = (data.astype(np.int16) + 8).astype(np.uint8)
    return np.ascontiguousarray(values[:, 0::2] | (values[:, 1::2] << 4)).tobytes()


def _int4_translate(lw: Lowering, node: torch.fx.Node) -> None:
    role, linear, details = _int4_role(node, lw.ep)
    if role == "activation":
        if node is not (linear.args[1] if linear.target == aten.addmm.default else linear.args[0]):
            return  # computed by XNNPACK's convert
        root = details
        source = lw.get(root, NCHW)
        if tuple(lw.builder.tensor(source).dims) != shape(node):  # the same rows, flattened
            flat = lw.builder.value(shape(node))
            new_shape = reshape_dims(node)
            lw.node("XNNStaticReshape", num_dims=2, new_shape=new_shape, input_id=source, output_id=flat, flags=0)
            source = flat
        per_token = s.PerTokenDynamicQuant(num_nonbatch_dims=1)
        out = lw.builder.quantized_value(shape(node), D.xnn_datatype_qdint8, per_token)
        lw.node("XNNConvert", input_id=source, output_id=out, flags=0)
        lw.values[node] = {NCHW: out}
        return
    if role == "weight":
        return
    bias, x = (linear.args[0], linear.args[1]) if linear.target == aten.addmm.default else (None, linear.args[0])
    w = details
    if isinstance(w, QuantizedWeight):
        filter_id = filter_value(lw, w, w.data)
    else:
        filter_id = _int4_filter(lw, w)
    bias_id = float_bias(lw, bias)
    source = lw.get(x, NCHW)
    out = lw.output(linear)
    lw.node("XNNFullyConnected", input1_id=source, filter_id=filter_id, bias_id=bias_id, output_id=out, flags=0)


def _int4_filter(lw: Lowering, w: _Int4Weight) -> int:
    scales = w.scale.detach().to(torch.bfloat16).contiguous()
    index = lw.builder.store(scales.view(torch.int16).numpy().tobytes())
    groups = s.PerChannelGroupQuant(
        scale=[], channel_dim=0, group_size=w.group_size, scale_buffer_idx=index, num_scales=int(scales.numel())
    )
    return lw.builder.quantized_value(w.data.shape, D.xnn_datatype_qbint4, groups, _pack_int4(w.data))


def _with_int4(target) -> None:
    """Nodes of 8da4w linear layers first, then the target's other quantized translation."""
    other = _QUANTIZED.get(target)

    def check(node, ep) -> bool:
        if _int4_role(node, ep) is not None:
            return _int4_check(node, ep)
        return other is not None and bool(other.check(node, ep))

    def translate(lw: Lowering, node: torch.fx.Node) -> None:
        if _int4_role(node, lw.ep) is not None:
            _int4_translate(lw, node)
        else:
            other.translate(lw, node)

    lowers_quantized(target, check=check)(translate)


def _in_domain_or_int4(in_domain):
    """`QUANT_HOOKS.in_domain` extended to the nodes of 8da4w linear layers."""

    def claims(node: torch.fx.Node, ep) -> bool:
        return in_domain(node, ep) or (node.target in _INT4_TARGETS and _int4_role(node, ep) is not None)

    return claims


def _dynamic_or_int4(dynamic):
    """`QUANT_HOOKS.dynamic` extended to the nodes of 8da4w linear layers (XNNPACK quantizes the
    activation per call)."""

    def holds(node: torch.fx.Node, ep) -> bool:
        return dynamic(node, ep) or (node.target in _INT4_TARGETS and _int4_role(node, ep) is not None)

    return holds


for _target in _INT4_TARGETS:
    _with_int4(_target)
QUANT_HOOKS.in_domain = _in_domain_or_int4(QUANT_HOOKS.in_domain)
QUANT_HOOKS.dynamic = _dynamic_or_int4(QUANT_HOOKS.dynamic)
