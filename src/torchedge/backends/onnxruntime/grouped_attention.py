"""Grouped-query attention that reads the key and value heads once, before partitioning.

transformers repeats each of a layer's ``kv`` cached heads ``g`` times to meet the query heads
(``unsqueeze(k, 2)``, ``expand`` to ``[b, kv, g, t, d]``, ``view`` to ``[b, kv*g, t, d]``), then
multiplies each query head by its copy: ``bmm(q [b*kv*g, s, d], k^T [b*kv*g, d, t])``. The query
heads of one group are adjacent, so the same products come from ``bmm(q [b*kv, g*s, d],
k^T [b*kv, d, t])`` with the result viewed back: every output element is the same dot product,
and the repeat (a copy of the whole cache per layer) is gone. The transpose and scalar scaling
on the way from the repeat to the ``bmm`` apply to the ``kv`` heads instead, the transpose next
to the product (where ONNX Runtime fuses it into the product). Likewise for the attention
weights times the values.
"""

from __future__ import annotations

import torch

from torchedge.exir.passes.fusion_matching import fake_call

__all__ = ["group_attention_heads"]

aten = torch.ops.aten
# Operators between the repeat and the bmm that commute with repeating heads.
_TRANSPOSE = aten.permute_copy.default


def _is_scaling(node: torch.fx.Node) -> bool:
    """A product with a number or a 0-d tensor, the same for every head."""
    if node.target is aten.mul.Scalar:
        return isinstance(node.args[1], (int, float))
    factor = node.args[1] if node.target is aten.mul.Tensor else None
    return isinstance(factor, torch.fx.Node) and factor.meta["val"].dim() == 0


def _shape(node) -> list:
    return list(node.meta["val"].shape)


def _is_identity(node: torch.fx.Node) -> bool:
    """An expand, clone or view whose output has its input's sizes."""
    same = node.target in (aten.expand_copy.default, aten.clone.default, aten.view_copy.default)
    return same and _text(_shape(node)) == _text(_shape(node.args[0]))


def _operand(node: torch.fx.Node, target) -> torch.fx.Node | None:
    """The first operand of ``node`` if it is a call of ``target``."""
    source = node.args[0]
    return source if isinstance(source, torch.fx.Node) and source.target is target else None


def _repeated_heads(node: torch.fx.Node) -> tuple[torch.fx.Node, int] | None:
    """``(kv, g)`` if ``node`` is ``view(expand(unsqueeze(kv, 2), [b, n, g, t, d]), [b, n*g, t, d])``
    (a clone allowed before the view), with ``kv`` a 4-D value of ``n`` heads."""
    if node.target is not aten.view_copy.default:
        return None
    source = _operand(node, aten.clone.default) or node
    expand = _operand(source, aten.expand_copy.default)
    unsqueeze = expand and _operand(expand, aten.unsqueeze_copy.default)
    if expand is None or unsqueeze is None or unsqueeze.args[1] != 2:
        return None
    kv = unsqueeze.args[0]
    if not isinstance(kv, torch.fx.Node) or len(_shape(kv)) != 4:
        return None
    b, n, g, t, d = _shape(expand)
    if _text(_shape(unsqueeze)) != _text((b, n, 1, t, d)):
        return None
    if not isinstance(g, int) or _text(_shape(node)) != _text((b, n * g, t, d)):
        return None
    return kv, g


def _text(sizes) -> list[str]:
    return [str(s) for s in sizes]


def _trace(mat2) -> tuple[torch.fx.Node, int, bool, list, torch.fx.Node] | None:
    """From a bmm's second operand back to the repeat: ``(kv, g, transposed, scales, view)`` where
    ``view`` is the ``[b, h, x, y]`` to ``[b*h, x, y]`` view the bmm reads, or None where the chain
    is anything else."""
    if not isinstance(mat2, torch.fx.Node) or mat2.target is not aten.view_copy.default:
        return None
    view, node = mat2, mat2.args[0]
    if (
        not isinstance(node, torch.fx.Node)
        or len(_shape(node)) != 4
        or _text(_shape(node)[2:]) != _text(_shape(view)[1:])
    ):
        return None
    transposed, scales = False, list[tuple[object, object]]()
    while True:
        if not isinstance(node, torch.fx.Node) or node.op != "call_function" or len(node.users) != 1:
            return None
        found = _repeated_heads(node)
        if found is not None:
            return (*found, transposed, scales, view)
        if node.target is _TRANSPOSE and len(_shape(node)) == 4 and [d % 4 for d in node.args[1]] == [0, 1, 3, 2]:
            transposed = not transposed
        elif _is_scaling(node):
            scales.append((node.target, node.args[1]))
        elif not _is_identity(node):
            return None
        node = node.args[0]


def _rewrite(graph: torch.fx.Graph, bmm: torch.fx.Node) -> bool:
    traced = _trace(bmm.args[1])
    if traced is None:
        return False
    kv, g, transposed, scales, view = traced
    query = bmm.args[0]
    b, n = _shape(kv)[:2]
    if not all(isinstance(s, int) for s in _shape(kv)) or _text(_shape(view)[:1]) != [str(b * n * g)]:
        return False  # the views below take integer sizes and at most one -1
    if not isinstance(query, torch.fx.Node) or sum(not isinstance(s, int) for s in _shape(bmm)) > 1:
        return False
    with graph.inserting_before(bmm):
        heads = fake_call(graph, aten.view_copy.default, kv, [b * n, *_shape(kv)[2:]])
        if transposed:
            heads = fake_call(graph, _TRANSPOSE, heads, [0, 2, 1])
        for target, factor in reversed(scales):  # in the order the graph applies them
            heads = fake_call(graph, target, heads, factor)
        grouped = fake_call(graph, aten.view_copy.default, query, [b * n, -1, _shape(query)[-1]])
        product = fake_call(graph, aten.bmm.default, grouped, heads)
        sizes = [s if isinstance(s, int) else -1 for s in _shape(bmm)]
        result = fake_call(graph, aten.view_copy.default, product, sizes)
    bmm.replace_all_uses_with(result)
    graph.erase_node(bmm)
    _erase_unread(graph, view)
    return True


def _erase_unread(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """Erase ``node`` and the chain of first operands above it while nothing reads them."""
    while node.op == "call_function" and not node.users:
        source = node.args[0]
        graph.erase_node(node)
        if not isinstance(source, torch.fx.Node):
            return
        node = source


def group_attention_heads(graph_module: torch.fx.GraphModule) -> bool:
    """Rewrite, in place, each ``bmm`` whose second operand repeats key or value heads into one
    over the heads themselves; the repeats go. Returns whether the graph changed."""
    graph = graph_module.graph
    bmms = [n for n in graph.nodes if n.op == "call_function" and n.target is aten.bmm.default]
    changed = False
    for bmm in bmms:
        changed |= _rewrite(graph, bmm)
    if changed:
        graph_module.recompile()
    return changed
