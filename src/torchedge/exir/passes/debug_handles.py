"""Give every operator node a debug handle that survives all later passes.

Devtools map runtime events (instruction index, delegate debug ids) back to
the Edge graph through these handles; nodes that later passes create from a
node (its `alloc` buffers, a lifted scalar) copy its handle and stack trace.
"""

from __future__ import annotations

import torch

from torchedge.exir.pass_base import PassBase, PassResult

__all__ = ["DebugHandlePass", "inherit_debug_info"]

DEBUG_KEYS = ("debug_handle", "stack_trace", "nn_module_stack", "source_fn_stack")


def inherit_debug_info(new: torch.fx.Node, source: torch.fx.Node) -> None:
    """Copy where ``source`` came from onto a node a pass derived from it."""
    for key in DEBUG_KEYS:
        if key in source.meta:
            new.meta[key] = source.meta[key]


class DebugHandlePass(PassBase):
    """Number call nodes 1, 2, ... in graph order; keeps handles already assigned."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        nodes = [n for n in graph_module.graph.nodes if n.op == "call_function"]
        next_handle = 1 + max((n.meta.get("debug_handle", 0) for n in nodes), default=0)
        for node in nodes:
            if "debug_handle" not in node.meta:
                node.meta["debug_handle"] = next_handle
                next_handle += 1
        return PassResult(graph_module, bool(nodes))
