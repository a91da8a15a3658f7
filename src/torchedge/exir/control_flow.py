"""Control flow in the graph: `cond`, `map`, `scan` and `while_loop` calls and their sub-graphs.

torch.export records each as a higher-order operator whose first arguments are
``get_attr`` nodes naming sub-graph modules. This module is the compiler's one
vocabulary for them: which node is one, its sub-graphs with what binds each of
their inputs, and running a graph pass over a graph and every sub-graph it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from torchedge.errors import ExportError
from torchedge.exir.source import describe_node

__all__ = [
    "COND",
    "MAP",
    "SCAN",
    "WHILE_LOOP",
    "CONTROL_FLOW_OPS",
    "LOOP_OPERATORS",
    "Branch",
    "is_control_flow",
    "branches",
    "operands",
    "stacked_outputs",
    "OPERAND",
    "CALL_OUTPUT",
    "SLICE",
    "nested_graph_modules",
    "run_on_sub_graphs",
    "inherit_source_lines",
]

COND = torch.ops.higher_order.cond
MAP = torch.ops.higher_order.map_impl
SCAN = torch.ops.higher_order.scan
WHILE_LOOP = torch.ops.higher_order.while_loop
CONTROL_FLOW_OPS = (COND, MAP, SCAN, WHILE_LOOP)

_COUNTED = ("aten::sym_size.int", "executorch_prim::lt.Scalar", "aten::select_copy.int_out")
_COUNTER = ("executorch_prim::add.Scalar", "executorch_prim::sub.Scalar")
# The operators each call is emitted with, besides those of its sub-graphs (`torchedge.exir.emit.control_flow`).
LOOP_OPERATORS = {
    COND: (),
    MAP: (*_COUNTED, "executorch_prim::et_copy_index.tensor", *_COUNTER),
    SCAN: (*_COUNTED, "aten::copy_", "executorch_prim::et_copy_index.tensor", *_COUNTER),
    WHILE_LOOP: ("aten::copy_",),
}

# What binds a sub-graph input: an operand of the call, an output of the call (a loop's
# carried value lives in the call's output), or a slice of a scanned operand (its own tensor).
OPERAND, CALL_OUTPUT, SLICE = "operand", "call output", "slice"


@dataclass(frozen=True)
class Branch:
    """One sub-graph of a control-flow call and, per input, what binds it: ``(kind, index)``."""

    graph_module: torch.fx.GraphModule
    inputs: tuple[tuple[str, int], ...]


def is_control_flow(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in CONTROL_FLOW_OPS


def _sub_graph(node: torch.fx.Node, arg: torch.fx.Node) -> torch.fx.GraphModule:
    if not (isinstance(arg, torch.fx.Node) and arg.op == "get_attr"):
        raise ExportError(f"control flow {describe_node(node)}: its sub-graph is not a module attribute")
    module = node.graph.owning_module
    sub = getattr(module, arg.target) if module is not None else None
    if not isinstance(sub, torch.fx.GraphModule):
        raise ExportError(f"control flow {describe_node(node)}: '{arg.target}' is not a graph module")
    return sub


def operands(target, args: tuple) -> list:
    """The operands of a control-flow call with arguments ``args``, numbered as `branches` does."""
    if target is COND:
        return list(args[3])
    if target is MAP:
        return [*args[1], *args[2]]
    if target is SCAN:
        return [*args[1], *args[2], *args[3]]
    return [*args[2], *args[3]]


def branches(node: torch.fx.Node) -> list[Branch]:
    """The sub-graphs of a control-flow call, each with the binding of its inputs.

    Operands are numbered as `operands` lists them: cond ``(operands)``; map ``(xs, args)``;
    scan ``(init, xs, args)``; while_loop ``(carried, args)``.
    """
    args = node.args
    if node.target is COND:
        count = len(args[3])
        inputs = tuple((OPERAND, i) for i in range(count))
        return [Branch(_sub_graph(node, args[1]), inputs), Branch(_sub_graph(node, args[2]), inputs)]
    if node.target is MAP:
        xs, extra = len(args[1]), len(args[2])
        inputs = tuple((SLICE, i) for i in range(xs)) + tuple((OPERAND, xs + i) for i in range(extra))
        return [Branch(_sub_graph(node, args[0]), inputs)]
    if node.target is SCAN:
        carry, xs, extra = len(args[1]), len(args[2]), len(args[3])
        inputs = (
            tuple((CALL_OUTPUT, i) for i in range(carry))
            + tuple((SLICE, carry + i) for i in range(xs))
            + tuple((OPERAND, carry + xs + i) for i in range(extra))
        )
        return [Branch(_sub_graph(node, args[0]), inputs)]
    if node.target is WHILE_LOOP:
        carry, extra = len(args[2]), len(args[3])
        inputs = tuple((CALL_OUTPUT, i) for i in range(carry)) + tuple((OPERAND, carry + i) for i in range(extra))
        return [Branch(_sub_graph(node, args[0]), inputs), Branch(_sub_graph(node, args[1]), inputs)]
    raise ExportError(f"{node.target} is not a control-flow operator {describe_node(node)}")


def stacked_outputs(node: torch.fx.Node, outputs: tuple) -> tuple:
    """The outputs of a `map` or `scan` that stack one row per iteration (a scan's carried values come first)."""
    if node.target is MAP:
        return tuple(outputs)
    return tuple(outputs[len(node.args[1]) :]) if node.target is SCAN else ()


def nested_graph_modules(graph_module: torch.fx.GraphModule) -> Iterator[tuple[torch.fx.Node, torch.fx.GraphModule]]:
    """Every sub-graph under ``graph_module``, depth first, with the control-flow call holding it."""
    for node in graph_module.graph.nodes:
        if is_control_flow(node):
            for branch in branches(node):
                yield node, branch.graph_module
                yield from nested_graph_modules(branch.graph_module)


def run_on_sub_graphs(graph_module: torch.fx.GraphModule, run: Callable[[torch.fx.GraphModule], object]) -> None:
    """Run a graph pass on every sub-graph of ``graph_module`` (the pass edits each one in place)."""
    for _, sub in list(nested_graph_modules(graph_module)):
        run(sub)
        sub.graph.lint()
        sub.recompile()


def inherit_source_lines(graph_module: torch.fx.GraphModule) -> None:
    """Sub-graph nodes traced from code torch generated get the stack trace of their control-flow
    call in front of their own, so errors about them name the user's line."""
    for node in graph_module.graph.nodes:
        if not is_control_flow(node):
            continue
        outer = node.meta.get("stack_trace") or ""
        for branch in branches(node):
            for sub_node in branch.graph_module.graph.nodes:
                own = sub_node.meta.get("stack_trace") or ""
                frames = [line.strip() for line in own.splitlines() if line.strip().startswith("File ")]
                if outer and outer not in own and all(frame.startswith('File "<') for frame in frames):
                    sub_node.meta["stack_trace"] = outer + own
            inherit_source_lines(branch.graph_module)
