"""Turn Python scalars passed where a schema expects a Tensor into 0-d tensors.

``add.Tensor(x, 1e-6)`` becomes ``add.Tensor(x, scalar_tensor(1e-6, dtype=x.dtype))``;
constant folding then lifts the new node to a constant. A 0-d tensor ranks
below dimensioned tensors in type promotion, exactly like the Python scalar it
replaces; a float scalar takes the floating dtype the operator computes in.
"""

from __future__ import annotations

import torch

from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.pass_base import PassBase, PassResult

__all__ = ["ScalarToTensorPass"]

_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64}


def _scalar_dtype(value, node: torch.fx.Node) -> torch.dtype:
    """A float scalar takes the floating dtype the operator computes in (its output, else a
    floating input, else float64); ints and bools take int64 and bool."""
    if type(value) is not float:
        return _DTYPES[type(value)]
    out = node.meta.get("val")
    if isinstance(out, torch.Tensor) and out.dtype.is_floating_point:
        return out.dtype
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype.is_floating_point:
            return val.dtype
    return torch.float64


class ScalarToTensorPass(PassBase):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for node in list(graph.nodes):
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            args, kwargs = list(node.args), dict(node.kwargs)
            for position, schema_arg in enumerate(node.target._schema.arguments):
                if str(schema_arg.type) != "Tensor":
                    continue
                in_args = not schema_arg.kwarg_only and position < len(args)
                value = args[position] if in_args else kwargs.get(schema_arg.name)
                if type(value) not in _DTYPES:
                    continue
                dtype = _scalar_dtype(value, node)
                with graph.inserting_before(node):
                    scalar = graph.call_function(torch.ops.aten.scalar_tensor.default, (value,), {"dtype": dtype})
                scalar.meta["val"] = torch.tensor(value, dtype=dtype)
                inherit_debug_info(scalar, node)
                if in_args:
                    args[position] = scalar
                else:
                    kwargs[schema_arg.name] = scalar
                modified = True
            node.args, node.kwargs = tuple(args), kwargs
        return PassResult(graph_module, modified)
