"""Replace view operators with their copying twins (``view`` -> ``view_copy``).

The Edge dialect is functional: no operator returns an alias of its input.
"""

from __future__ import annotations

import torch

from torchedge.exir.op_schema import view_copy_variant
from torchedge.exir.passes.pass_base import PassBase, PassResult

__all__ = ["ViewToCopyPass"]


class ViewToCopyPass(PassBase):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                copy_op = view_copy_variant(node.target)
                if copy_op is not None:
                    node.target = copy_op
                    modified = True
        return PassResult(graph_module, modified)
