"""Turn Python scalars passed where a schema expects a Tensor into 0-d tensors.

``add.Tensor(x, 1e-6)`` becomes ``add.Tensor(x, scalar_tensor(1e-6, dtype=x.dtype))``;
constant folding then lifts the new node to a constant. Sizes known only at run time
(``x + y.shape[1]`` under dynamic shapes) become a ``scalar_tensor`` of the size's value,
which ExecuTorch's kernels need as well. A 0-d tensor ranks
below dimensioned tensors in type promotion, exactly like the Python scalar it
replaces; a float (complex) scalar takes the floating (complex) dtype the operator computes in.
Complex scalars have no place in the format but as such constant tensors.
"""

from __future__ import annotations

import torch

from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.passes.debug_handles import inherit_debug_info

__all__ = ["ScalarToTensorPass"]

_DTYPES = {
    bool: torch.bool,
    int: torch.int64,
    float: torch.float64,
    complex: torch.complex128,
    torch.SymBool: torch.bool,
    torch.SymInt: torch.int64,
    torch.SymFloat: torch.float64,
}


def _scalar_type(value) -> type | None:
    """The scalar type of a literal, or of a size computed at run time (a node of a Sym value)."""
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
        return type(value) if isinstance(value, (torch.SymBool, torch.SymInt, torch.SymFloat)) else None
    return type(value) if type(value) in _DTYPES else None


def _scalar_dtype(kind: type, node: torch.fx.Node) -> torch.dtype:
    """A float (complex) scalar takes the floating (complex) dtype the operator computes in:
    its output's, else a floating (complex) input's, else float64 (complex128); ints and
    bools take int64 and bool."""
    if kind not in (float, torch.SymFloat, complex):
        return _DTYPES[kind]
    same_kind = torch.Tensor.is_complex if kind is complex else torch.Tensor.is_floating_point
    for value in [node.meta.get("val"), *(arg.meta.get("val") for arg in node.all_input_nodes)]:
        if isinstance(value, torch.Tensor) and same_kind(value):
            return value.dtype
    return _DTYPES[kind]


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
                kind = _scalar_type(value)
                if kind is None:
                    continue
                dtype = _scalar_dtype(kind, node)
                with graph.inserting_before(node):
                    scalar = graph.call_function(torch.ops.aten.scalar_tensor.default, (value,), {"dtype": dtype})
                scalar.meta["val"] = _zero_dim(value, dtype, node)
                inherit_debug_info(scalar, node)
                if in_args:
                    args[position] = scalar
                else:
                    kwargs[schema_arg.name] = scalar
                modified = True
            node.args, node.kwargs = tuple(args), kwargs
        return PassResult(graph_module, modified)


def _zero_dim(value, dtype: torch.dtype, node: torch.fx.Node) -> torch.Tensor:
    """The 0-d tensor a scalar becomes (a fake one for a value known only at run time)."""
    if not isinstance(value, torch.fx.Node):
        return torch.tensor(value, dtype=dtype)
    with node.meta["val"].fake_mode:
        return torch.empty((), dtype=dtype)
