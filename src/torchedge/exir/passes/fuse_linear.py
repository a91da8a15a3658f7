"""Kernel fusion of linear layers: ``addmm`` / ``mm`` followed (through a reshape) by ``relu``,
``gelu`` or ``silu`` becomes ``torchedge_fused::linear_act``."""

from __future__ import annotations

import torch

from torchedge.exir.passes.fusion_matching import is_call, is_float_tensor, is_static, replace_with_fused, shape_of

__all__ = ["LINEAR_ACTIVATIONS", "fuse_linear"]

_aten = torch.ops.aten
LINEAR_ACTIVATIONS = {_aten.relu.default: "relu", _aten.gelu.default: "gelu", _aten.silu.default: "silu"}


def _silu_input(mul: torch.fx.Node):
    """x of ``mul(x, sigmoid(x))`` (silu as core ATen decomposes it), with the sigmoid node."""
    if len(mul.args) != 2 or mul.kwargs:
        return None, None
    for x, gate in (mul.args, reversed(mul.args)):
        if (
            is_call(gate, _aten.sigmoid.default)
            and gate.args[0] is x
            and len(gate.users) == 1
            and isinstance(x, torch.fx.Node)
            and set(x.users) == {gate, mul}
        ):
            return x, gate
    return None, None


def fuse_linear(graph: torch.fx.Graph, act: torch.fx.Node, ops: dict) -> bool:
    """Fuse the activation ``act`` with the ``addmm`` / ``mm`` it follows into ``linear_act``."""
    extra = []  # nodes of the activation besides act itself
    if act.target is _aten.mul.Tensor:
        source, gate = _silu_input(act)
        if source is None:
            return False
        activation, extra, users = "silu", [gate], 2
    else:
        activation, source, users = LINEAR_ACTIVATIONS[act.target], act.args[0], 1
        if act.target is _aten.gelu.default and (act.args[1:] or act.kwargs.get("approximate", "none")) not in (
            "none",
            ("none",),
        ):
            return False
    view = None
    if is_call(source, _aten.view_copy.default) and len(source.users) == users:
        view, source = source, source.args[0]
    elif isinstance(source, torch.fx.Node) and len(source.users) != users:
        return False
    if is_call(source, _aten.addmm.default) and len(source.args) == 3 and not source.kwargs:
        bias, x, weight = source.args
    elif is_call(source, _aten.mm.default):
        bias, (x, weight) = None, source.args
    else:
        return False
    if (
        len(source.users) != (1 if view is not None else users)
        or not is_static(source)
        or not all(is_float_tensor(t) for t in (source, x, weight))
    ):
        return False
    if bias is not None and (not is_float_tensor(bias) or len(shape_of(bias)) != 1):
        return False
    fused = replace_with_fused(graph, source, ops["linear_act"], (x, weight, bias, activation), [source])
    act.replace_all_uses_with(view if view is not None else fused)
    graph.erase_node(act)
    for node in extra:
        graph.erase_node(node)
    return True
