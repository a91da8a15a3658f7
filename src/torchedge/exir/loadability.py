""" "Will it load?": check a compiled method against the kernels its target runtime has.

A program that would fail to load on the device (a missing operator) fails
to compile instead, naming the operator, the dtypes it is called with and the
user's source line.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable

import torch

from torchedge.errors import ExportError
from torchedge.exir.control_flow import LOOP_OPERATORS, is_control_flow, nested_graph_modules
from torchedge.exir.ir import is_delegate_call, op_name
from torchedge.exir.memory import alloc, view
from torchedge.exir.source import describe_node
from torchedge.exir.symbolic import is_scalar_call, scalar_kernel_name

__all__ = ["kernel_set_predicate", "check_loadable"]


def kernel_set_predicate(kernel_set: Iterable[str] | None) -> Callable[[str], bool]:
    """``None``: torchedge's own runtime kernels; otherwise the given operator names."""
    if kernel_set is None:
        from torchedge.kernels.registry import has_kernel

        return has_kernel
    names = frozenset(kernel_set)
    return names.__contains__


def _dtypes(node: torch.fx.Node) -> str:
    dtypes = []
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor):
            dtypes.append(str(val.dtype).removeprefix("torch."))
    return ", ".join(dtypes) or "no tensor inputs"


def _delegate_problem(node: torch.fx.Node, backends: Iterable[str] | None) -> str | None:
    lowered = getattr(node.graph.owning_module, node.args[0].target)
    if backends is not None and lowered.backend_id not in backends:
        return f"  backend '{lowered.backend_id}' (a delegate call) {describe_node(node)}"
    return None


def check_loadable(
    graph_module: torch.fx.GraphModule,
    method: str,
    available: Callable[[str], bool],
    backends: Iterable[str] | None = None,
) -> None:
    """Raise `ExportError` listing every operator (and delegate backend) the target cannot run.

    ``backends``: the backend ids the target runtime has; None accepts any.
    """
    problems = []
    graphs = [graph_module, *(sub for _, sub in nested_graph_modules(graph_module))]
    for node in (node for graph in graphs for node in graph.graph.nodes):
        if node.op != "call_function" or node.target in (alloc, view, operator.getitem):
            continue
        if is_control_flow(node):
            problems += [
                f"  operator '{name}' (for {node.target.name()}) {describe_node(node)}"
                for name in LOOP_OPERATORS[node.target]
                if not available(name)
            ]
            continue
        if is_delegate_call(node):
            problem = _delegate_problem(node, backends)
            if problem:
                problems.append(problem)
            continue
        if is_scalar_call(node):
            base, overload = scalar_kernel_name(node)
            name = f"{base}.{overload}" if overload else base
        elif isinstance(node.target, torch._ops.OpOverload):
            name = op_name(node.target)
        else:
            continue
        if not available(name):
            problems.append(f"  operator '{name}' called with ({_dtypes(node)}) {describe_node(node)}")
    if problems:
        raise ExportError(
            f"method '{method}' would not load: the target lacks\n"
            + "\n".join(problems)
            + "\nregister a kernel for it, target another kernel set, or delegate it to a backend"
        )
