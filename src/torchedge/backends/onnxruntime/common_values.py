"""Compute once what several nodes compute alike, before partitioning.

A transformers static cache gives each decoder layer its own copy of the same bookkeeping: the
layer's position counter is overwritten with ``cache_position[0]`` (``copy(counter, select)``),
and the rows to update are ``arange(s) + counter``. A copy onto a tensor of the source's shape
and dtype is its source, so the counters' copies are one value, and so are the rows: each layer
runs its cache update from one shared row index instead of a chain of its own.

Nodes the output node reads (user outputs, state updates) are kept as they are, since the
graph signature names them; so are operators tagged nondeterministic.
"""

from __future__ import annotations

import torch

from torchedge.exir.passes.same_values import value_key

__all__ = ["merge_common_values"]

aten = torch.ops.aten


def _same_tensor_kind(a, b) -> bool:
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype


def _is_identity_copy(node: torch.fx.Node) -> bool:
    """``copy(dst, src)`` whose result is ``src``'s values: same shape and dtype."""
    if node.target is not aten.copy.default or not isinstance(node.args[1], torch.fx.Node):
        return False
    return _same_tensor_kind(node.meta.get("val"), node.args[1].meta.get("val"))


def merge_common_values(graph_module: torch.fx.GraphModule) -> bool:
    """Replace, in place, each identity copy by its source and each node that repeats an earlier
    one's operator and arguments by that node; nodes the graph outputs are kept. Returns whether
    the graph changed."""
    graph = graph_module.graph
    output = next(n for n in graph.nodes if n.op == "output")
    kept = set(output.all_input_nodes)
    seen: dict = {}
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node in kept:
            continue
        if _is_identity_copy(node):
            node.replace_all_uses_with(node.args[1])
            graph.erase_node(node)
            changed = True
            continue
        key = value_key(node)
        if key is None:
            continue
        if key in seen:
            node.replace_all_uses_with(seen[key])
            graph.erase_node(node)
            changed = True
        else:
            seen[key] = node
    if changed:
        graph_module.recompile()
    return changed
