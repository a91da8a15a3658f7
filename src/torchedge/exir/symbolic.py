"""Dynamic shapes on the compiler side: upper bounds of symbolic sizes, and the scalar
operators that compute sizes at run time.

A dimension exported with ``torch.export.Dim("n", max=...)`` is a SymInt in the graph. Memory
is planned for its upper bound (ExecuTorch's DYNAMIC_BOUND tensors), and the graph's size
arithmetic (``sym_size``, ``operator.mul`` on SymInts, ...) becomes ``executorch_prim``
instructions whose results feed the kernels' size arguments.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, constrain_range

from torchedge.errors import ExportError

__all__ = [
    "SYM_OPS",
    "upper_bound",
    "upper_bound_shape",
    "is_unbounded",
    "bound_data_dependent_sizes",
    "is_dynamic",
    "decided",
    "is_scalar_call",
    "scalar_kernel_name",
]

# Python-level size arithmetic that torch.export records -> the executorch_prim kernel computing it.
SYM_OPS: dict = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.floordiv: "floordiv",
    operator.truediv: "truediv",
    operator.mod: "mod",
    operator.eq: "eq",
    operator.gt: "gt",
    operator.lt: "lt",
    operator.ge: "ge",
    operator.le: "le",
    operator.neg: "neg",
    torch.sym_max: "sym_max",
    torch.sym_min: "sym_min",
    torch.sym_float: "sym_float",
    torch.sym_int: "sym_int",
    torch.sym_not: "sym_not",
    torch.sym_ite: "sym_ite",
    math.ceil: "ceil",
    math.trunc: "trunc",
    round: "round",
}


def _bound(size) -> int | None:
    """The largest value a (possibly symbolic) size can take, None if it has no bound."""
    if not isinstance(size, torch.SymInt):
        return int(size)
    bound = size.node.shape_env.bound_sympy(size.node.expr).upper
    # a concrete integer, not sympy's oo nor torch's int_oo (sometimes given as sys.maxsize - 1)
    return int(bound) if bound.is_Integer and int(bound) < sys.maxsize - 1 else None


def is_unbounded(shape) -> bool:
    """Whether some dimension of ``shape`` has no upper bound (a size only the data decides,
    as ``bincount``'s): such a tensor gets its memory at run time (DYNAMIC_UNBOUND)."""
    return any(_bound(s) is None for s in shape)


def upper_bound(size, what: str = "a dimension") -> int:
    """The largest value a (possibly symbolic) size can take; an error if it has none."""
    bound = _bound(size)
    if bound is None:
        node = size.node
        raise ExportError(
            f"{what} has the unbounded size {node.expr}: memory is planned for the largest "
            f"size, so give the dimension a maximum, e.g. torch.export.Dim('n', max=1024)"
        )
    return bound


def upper_bound_shape(shape, what: str = "a tensor") -> tuple[int, ...]:
    return tuple(upper_bound(s, f"dimension {d} of {what}") for d, s in enumerate(shape))


def _masked_select_bound(node: torch.fx.Node) -> int:
    """At most every element of ``self`` and ``mask`` broadcast together."""
    self, mask = (arg.meta["val"] for arg in node.args[:2])
    return math.prod(upper_bound_shape(torch.broadcast_shapes(self.shape, mask.shape), "masked_select's input"))


# Operators whose output size only the data decides, yet which the operator bounds where torch's
# fake kernel leaves it unbounded: the bound, from the node.
_DATA_DEPENDENT_BOUNDS: dict = {torch.ops.aten.masked_select.default: _masked_select_bound}


def bound_data_dependent_sizes(graph_module: torch.fx.GraphModule) -> None:
    """Give each size only the data decides the bound its operator implies (``masked_select``:
    the broadcast numel), so that memory can be planned for it and for what is computed from it."""
    for module in graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            bound = _DATA_DEPENDENT_BOUNDS.get(node.target)
            if bound is None:
                continue
            size = node.meta["val"].shape[0]
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                constrain_range(size, min=0, max=bound(node))


def is_dynamic(tensor: torch.Tensor) -> bool:
    return any(isinstance(s, torch.SymInt) for s in tensor.shape)


def decided(question: Callable[[], bool], otherwise: bool) -> bool:
    """``question()`` about sizes, or ``otherwise`` when the answer depends on sizes that only
    the data decides (unbacked symbols, as after ``nonzero``)."""
    try:
        return bool(question())
    except GuardOnDataDependentSymNode:
        return otherwise


def is_scalar_call(node: torch.fx.Node) -> bool:
    """A call computing a Python scalar (a size, a size comparison) instead of a tensor."""
    if node.op != "call_function":
        return False
    if node.target in SYM_OPS:
        return True
    op = node.target
    return (
        isinstance(op, torch._ops.OpOverload)
        and bool(op._schema.returns)
        and not any("Tensor" in str(r.type) for r in op._schema.returns)
    )


def scalar_kernel_name(node: torch.fx.Node) -> tuple[str, str]:
    """(operator name, overload) of the kernel that computes a scalar call."""
    if node.target in SYM_OPS:
        return f"executorch_prim::{SYM_OPS[node.target]}", "Scalar"
    schema = node.target._schema
    return schema.name, schema.overload_name
