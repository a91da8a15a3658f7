"""Drop runtime assertion ops that export leaves in the graph and ExecuTorch does not run,
and the size arithmetic that only fed them."""

from __future__ import annotations

import torch

from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.symbolic import is_scalar_call

__all__ = ["RemoveAssertsPass"]

_ASSERT_OPS = {
    torch.ops.aten._assert_tensor_metadata.default,
    torch.ops.aten._assert_scalar.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten._assert_async.msg,
}


class RemoveAssertsPass(PassBase):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in reversed(list(graph_module.graph.nodes)):  # users first: size arithmetic feeding asserts dies too
            if node.users or node.op != "call_function":
                continue
            if node.target in _ASSERT_OPS or is_scalar_call(node):
                graph_module.graph.erase_node(node)
                modified = True
        return PassResult(graph_module, modified)
