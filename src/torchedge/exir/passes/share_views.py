"""Let reshapes share memory with their input instead of copying it.

``view_copy(x, shape)`` of a planned, contiguous tensor becomes
``memory.view(x, shape)``: no bytes, no instruction (ExecuTorch's
``remove_view_copy``). Views of constants stay copies, since constants are not
planned memory.
"""

from __future__ import annotations

from collections.abc import Set

import torch

from torchedge.exir import memory
from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.symbolic import is_dynamic

__all__ = ["ShareViewsPass"]

_RESHAPES = {torch.ops.aten.view_copy.default, torch.ops.aten._unsafe_view.default}


def _is_contiguous(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.is_contiguous()


class ShareViewsPass(PassBase):
    def __init__(self, constant_names: Set[str] = frozenset()):
        super().__init__()
        self.constant_names = set(constant_names)

    def _is_planned(self, node: torch.fx.Node) -> bool:
        return not (node.op == "placeholder" and node.name in self.constant_names)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in graph_module.graph.nodes:
            if node.op != "call_function" or node.target not in _RESHAPES:
                continue
            base = node.args[0]
            if self._is_planned(base) and _is_contiguous(base) and _is_contiguous(node):
                node.target = memory.view
                shape = node.meta["val"].shape
                # A dynamic view keeps its size argument: the sizes computed at run time.
                node.args = (base, node.args[1] if is_dynamic(node.meta["val"]) else tuple(int(s) for s in shape))
                node.kwargs = {}
                modified = True
        return PassResult(graph_module, modified)
