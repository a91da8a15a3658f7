"""Quantized linear layers on more than two dims, made whole patterns before partitioning.

``to_edge`` writes ``linear`` of a [..., K] activation as ``view [M, K] -> addmm -> view
[..., N]``, and PT2E's dequantize stays before the first view, its quantize after the second:
neither the views nor the product sit between a dequantize and a quantize, so the layer would
stay outside the delegate, running in float on dequantized values (ExecuTorch's lowering keeps
``linear`` whole and delegates it). `requantize_linear_views` rewrites it:

* after a view of a static dequantized activation that a linear layer reads: a quantize and a
  dequantize with the activation's parameters, which the layer then reads;
* between a linear layer and a view whose every user quantizes with one set of parameters: a
  quantize and a dequantize with those parameters (a relu or clamp between the view and the
  quantize, which the layer fuses, moves before the view: elementwise, it commutes with it);
* a dynamically quantized activation (``choose_qparams -> quantize -> dequantize``, then the
  view) is quantized after the view instead, by a chain of the layer's own (as ExecuTorch
  duplicates a dynamic chain per linear layer: each quantizes inside its delegate, wherever the
  partitioner puts it).

All are exact. A dequantized int8 value quantized again with its own parameters gives its integer
back: ``(k - zero_point) * scale * (1 / scale)`` is within a few float32 roundings of
``k - zero_point`` (at most 255 in magnitude), far from the half step where ``round`` would change
it. ``choose_qparams`` takes the minimum and maximum of the whole tensor, which a view does not
change, and quantizing is elementwise; a view moves values without changing them. So each layer
reads the same floats, and each quantize after a view writes the same integers.
"""

from __future__ import annotations

import operator

import torch

from torchedge.backends.xnnpack.aot.quantized_graph import (
    CHOOSE,
    CLAMPS,
    DQ_DYNAMIC,
    Q_DYNAMIC,
    activation_params,
    aten,
    call_args,
    is_call,
    static_params_node,
)
from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.fusion_matching import fake_call

__all__ = ["requantize_linear_views"]

_LINEARS = (aten.addmm.default, aten.mm.default)
_quantized = torch.ops.quantized_decomposed


def requantize_linear_views(graph_module: torch.fx.GraphModule) -> int:
    """Rewrites the layers above, in place; returns how many views it rewrote."""
    graph = graph_module.graph
    added = 0
    for node in [n for n in graph.nodes if is_call(n, *_LINEARS)]:
        x = node.args[1] if node.target == aten.addmm.default else node.args[0]
        if is_call(x, aten.view_copy.default) and activation_params(x.args[0]) is not None:
            node.replace_input_with(x, _pair(graph, x, call_args(x.args[0], 6)[1:]))
            added += 1
        elif is_call(x, aten.view_copy.default) and (chain := _dynamic_chain(x.args[0])) is not None:
            node.replace_input_with(x, _dynamic_view(graph, node, x, chain))
            _erase_unused(graph, x)
            added += 1
        added += _quantize_result(graph, node)
    if added:
        graph_module.recompile()
    return added


def _quantize_result(graph: torch.fx.Graph, node: torch.fx.Node) -> int:
    """The pair between a linear layer and the view after it (a relu or clamp after the view
    moved before it: elementwise, it commutes with the view), where every user of the view (or
    of the clamp) quantizes with one set of parameters; 1 if added."""
    users = list(node.users)
    if len(users) != 1 or not is_call(users[0], aten.view_copy.default) or users[0].args[0] is not node:
        return 0
    view = users[0]
    after = list(view.users)
    clamp = after[0] if len(after) == 1 and after[0].target in CLAMPS and not after[0].kwargs else None
    quantize = static_params_node(clamp if clamp is not None else view)
    if quantize is None:
        return 0
    params = call_args(quantize, 6)[1:]
    if clamp is None:
        view.replace_input_with(node, _pair(graph, node, params))
        return 1
    with graph.inserting_after(node):
        clamped = fake_call(graph, clamp.target, node, *clamp.args[1:])
    inherit_debug_info(clamped, clamp)
    pair = _pair(graph, clamped, params)
    with graph.inserting_after(pair):
        reshaped = fake_call(graph, view.target, pair, *view.args[1:])
    inherit_debug_info(reshaped, view)
    clamp.replace_all_uses_with(reshaped)
    graph.erase_node(clamp)
    graph.erase_node(view)
    return 1


def _dynamic_chain(dequantize) -> tuple | None:
    """(activation, choose_qparams node) of ``dequantize(quantize(activation, choose_qparams(activation)))``
    with one set of parameters, else None."""
    if not is_call(dequantize, DQ_DYNAMIC) or not is_call(dequantize.args[0], Q_DYNAMIC):
        return None
    quantize = call_args(dequantize.args[0], 6)
    if call_args(dequantize, 6)[1:] != quantize[1:]:
        return None
    scale, zero_point = quantize[1:3]
    if not (is_call(scale, operator.getitem) and is_call(zero_point, operator.getitem)):
        return None
    choose = scale.args[0]
    if zero_point.args[0] is not choose or (scale.args[1], zero_point.args[1]) != (0, 1):
        return None
    return (quantize[0], choose) if is_call(choose, CHOOSE) and choose.args[0] is quantize[0] else None


def _dynamic_view(graph: torch.fx.Graph, linear: torch.fx.Node, view: torch.fx.Node, chain: tuple) -> torch.fx.Node:
    """The dequantize of ``view``'s activation viewed first, then quantized by a chain of its own
    (``chain``: the activation and its ``choose_qparams``, `_dynamic_chain`)."""
    dequantize = view.args[0]
    activation, choose = chain
    quantize_args = call_args(dequantize.args[0], 6)[3:]
    with graph.inserting_before(linear):
        viewed = fake_call(graph, view.target, activation, *view.args[1:])
        chosen = fake_call(graph, choose.target, viewed, *choose.args[1:])
        scale, zero_point = (fake_call(graph, operator.getitem, chosen, i) for i in (0, 1))
        quantized = fake_call(graph, dequantize.args[0].target, viewed, scale, zero_point, *quantize_args)
        result = fake_call(graph, dequantize.target, quantized, scale, zero_point, *quantize_args)
    for new in (viewed, chosen, scale, zero_point, quantized, result):
        inherit_debug_info(new, view)
    return result


def _erase_unused(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """``node`` and then its inputs, as far as nothing reads them any more."""
    pending, erased = [node], set()
    while pending:
        node = pending.pop()
        if node not in erased and node.op == "call_function" and not node.users:
            pending += node.all_input_nodes
            graph.erase_node(node)
            erased.add(node)


def _pair(graph: torch.fx.Graph, value: torch.fx.Node, params: tuple) -> torch.fx.Node:
    """``dequantize(quantize(value))`` with ``params`` (scale, zero point, range, dtype), right after ``value``."""
    with graph.inserting_after(value):
        quantize = fake_call(graph, _quantized.quantize_per_tensor.default, value, *params)
    with graph.inserting_after(quantize):
        dequantize = fake_call(graph, _quantized.dequantize_per_tensor.default, quantize, *params)
    for new in (quantize, dequantize):
        inherit_debug_info(new, value)
    return dequantize
