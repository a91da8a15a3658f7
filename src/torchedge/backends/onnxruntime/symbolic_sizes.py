"""Free reshapes and expands from the symbolic sizes they are given, before partitioning.

``view_copy(x, [1, s, 9, 64])`` reads ``s`` from a ``sym_size`` node, a graph value that is not a
tensor, so it could not join a delegate. Where the symbolic size can be inferred (-1 for a view
whose output has one symbolic size, the others read from the output; -1, "keep this size", for an
expand), the size list becomes integers only; the meta value
of the node, and so its semantics, is unchanged.
"""

from __future__ import annotations

import torch

__all__ = ["infer_symbolic_sizes"]

aten = torch.ops.aten


def _inferred(node: torch.fx.Node) -> list[int] | None:
    """The integer size list equivalent to the node's, or None if it has none or needs none."""
    sizes = node.args[1]
    if not isinstance(sizes, (list, tuple)) or all(isinstance(s, int) for s in sizes):
        return None
    if node.target is aten.view_copy.default:
        # The output's sizes are the truth: its one symbolic size is what -1 infers from the rest.
        out = node.meta["val"].shape
        symbolic = [i for i, s in enumerate(out) if not isinstance(s, int)]
        if len(symbolic) != 1 or 0 in out:
            return None
        return [-1 if i == symbolic[0] else int(s) for i, s in enumerate(out)]
    source = node.args[0].meta["val"].shape
    lead = len(sizes) - len(source)
    out = node.meta["val"].shape
    target = []
    for i, size in enumerate(sizes):
        if isinstance(size, int):
            target.append(size)
        elif i >= lead and str(source[i - lead]) == str(out[i]):
            target.append(-1)  # expand keeps the input's size
        else:
            return None
    return target


def infer_symbolic_sizes(graph_module: torch.fx.GraphModule) -> None:
    """Rewrite, in place, the size lists of ``view_copy`` and ``expand_copy`` to integers where the
    one symbolic size they hold follows from the input's; ``sym_size`` nodes left unread go."""
    graph = graph_module.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in (aten.view_copy.default, aten.expand_copy.default):
            target = _inferred(node)
            if target is not None:
                node.args = (node.args[0], target, *node.args[2:])
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is aten.sym_size.int and not node.users:
            graph.erase_node(node)
    graph_module.recompile()
