"""Replace view operators with their copying twins (``view`` -> ``view_copy``).

The Edge dialect is functional: no operator returns an alias of its input.
"""

from __future__ import annotations

import torch

from torchedge.exir.op_schema import view_copy_variant
from torchedge.exir.pass_base import PassBase, PassResult

__all__ = ["ViewToCopyPass"]


def _contiguous(val):
    """The copy's result is a fresh dense tensor, whatever strides the view had."""
    if isinstance(val, torch.Tensor):
        return val.clone(memory_format=torch.contiguous_format)
    if isinstance(val, (tuple, list)):
        return type(val)(_contiguous(v) for v in val)
    return val


class ViewToCopyPass(PassBase):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in graph_module.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                copy_op = view_copy_variant(node.target)
                if copy_op is not None:
                    node.target = copy_op
                    node.meta["val"] = _contiguous(node.meta.get("val"))
                    modified = True
        return PassResult(graph_module, modified)
