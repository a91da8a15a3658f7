"""IR verifiers: errors surface at compile time on the host, never on a device.

`verify_aten` checks the ATen dialect (every call is an ATen or registered
custom operator); `verify_edge` adds the Edge dialect's rules: only Edge
operators, no Python scalars where a tensor is required, dtypes that satisfy
one of the operator's constraints, memory formats a dim order can describe.
Every violation names the node, the operator, what was found and allowed,
and the user's source line.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch

from torchedge.errors import ExportError
from torchedge.exir.control_flow import branches, is_control_flow, nested_graph_modules
from torchedge.exir.ir import bind_arguments, executorch_call_delegate, op_name
from torchedge.exir.op_schema import out_variant, returns_nothing
from torchedge.exir.passes.functional_twins import mutating_twin
from torchedge.exir.source import describe_node
from torchedge.exir.symbolic import is_scalar_call
from torchedge.exir.tensor_spec import describable_by_dim_order

__all__ = ["IRVerificationError", "verify_aten", "verify_edge"]


class IRVerificationError(ExportError):
    """A graph violates the rules of its dialect."""


def _fail(node: torch.fx.Node, message: str) -> IRVerificationError:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        target = op_name(target)
    elif isinstance(target, torch._ops.HigherOrderOperator):
        target = f"higher_order.{target.name()}"
    return IRVerificationError(f"{message}: operator '{target}' {describe_node(node)}")


def _calls(graph_module: torch.fx.GraphModule):
    """Operator calls on tensors (delegate calls are opaque to the Edge rules; size arithmetic has none)."""
    for node in graph_module.graph.nodes:
        if (
            node.op == "call_function"
            and node.target not in (operator.getitem, executorch_call_delegate)
            and not is_scalar_call(node)
        ):
            yield node


def verify_aten(graph_module: torch.fx.GraphModule) -> None:
    for node in _calls(graph_module):
        if not isinstance(node.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
            raise _fail(node, "only ATen, registered custom and control-flow operators may be called")
        if isinstance(node.target, torch._ops.HigherOrderOperator) and not is_control_flow(node):
            raise _fail(node, "only the control-flow operators cond, map, scan and while_loop hold sub-graphs")
    for _, sub in nested_graph_modules(graph_module):
        verify_aten(sub)


def _in_edge_set(op: torch._ops.OpOverload, has_kernel: Callable[[str], bool]) -> bool:
    if op.namespace != "aten":
        return True  # a registered custom operator
    if torch.Tag.core in op.tags:
        return True
    if returns_nothing(op):
        return has_kernel(op_name(op))
    twin = mutating_twin(op)  # lowered onto its twin by FunctionalTwinsPass
    if twin is not None:
        return _in_edge_set(twin, has_kernel)
    try:
        return has_kernel(op_name(out_variant(op)))
    except ExportError:
        return False


def _dtype_problem(node: torch.fx.Node) -> str | None:
    from torchedge.exir.dialects.constraints import check_node_dtypes

    bound = bind_arguments(node.target, node.args, node.kwargs)
    arg_dtypes = {
        name: value.meta["val"].dtype
        for name, value in bound.items()
        if isinstance(value, torch.fx.Node) and isinstance(value.meta.get("val"), torch.Tensor)
    }
    return check_node_dtypes(node.target, arg_dtypes, _return_dtypes(node))


def _return_dtypes(node: torch.fx.Node) -> list:
    """One entry per schema return: a dtype, a list of dtypes for ``Tensor[]``, None for non-tensors."""
    val = node.meta.get("val")
    returns = node.target._schema.returns
    if not returns:
        return []
    if len(returns) == 1 and isinstance(returns[0].type, torch.ListType):
        return [[v.dtype for v in val]]
    values = val if isinstance(val, (tuple, list)) else [val]
    return [v.dtype if isinstance(v, torch.Tensor) else None for v in values]


def verify_edge(graph_module: torch.fx.GraphModule, check_dtypes: bool = True) -> None:
    from torchedge.kernels.registry import has_kernel

    verify_aten(graph_module)
    for node in _calls(graph_module):
        op = node.target
        if is_control_flow(node):
            for branch in branches(node):
                verify_edge(branch.graph_module, check_dtypes)
            continue
        if not isinstance(op, torch._ops.OpOverload):
            raise _fail(node, "only ATen, registered custom and control-flow operators may be called")
        if not _in_edge_set(op, has_kernel):
            raise _fail(node, "not an Edge operator (neither core ATen nor backed by a kernel)")
        bound = bind_arguments(op, node.args, node.kwargs)
        for schema_arg in op._schema.arguments:
            value = bound.get(schema_arg.name)
            if str(schema_arg.type) == "Tensor" and isinstance(value, (bool, int, float)):
                raise _fail(
                    node,
                    f"argument '{schema_arg.name}' is the Python scalar {value!r} where a Tensor "
                    "is required (run ScalarToTensorPass)",
                )
        val = node.meta.get("val")
        for out in val if isinstance(val, (tuple, list)) else [val]:
            if isinstance(out, torch.Tensor) and not describable_by_dim_order(out):
                raise _fail(node, f"output strides {out.stride()} are not dense in any dim order")
        if check_dtypes:
            problem = _dtype_problem(node)
            if problem:
                raise _fail(node, problem)
