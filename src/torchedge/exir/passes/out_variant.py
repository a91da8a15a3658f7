"""Swap every functional operator for its out variant, with an `alloc` node per output.

``relu(x)`` becomes ``relu.out(x, out=alloc((2, 3), float32))``: the buffer an
operator writes becomes a node of its own, which memory planning places and
the emitter turns into a planned tensor.
"""

from __future__ import annotations

import operator

import torch

from torchedge.errors import ExportError
from torchedge.exir.control_flow import is_control_flow
from torchedge.exir.ir import bind_arguments, is_delegate_call
from torchedge.exir.memory import alloc, view
from torchedge.exir.op_schema import is_inplace, is_out_variant, out_argument_names, out_variant, returns_nothing
from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.mutable_state import OUT_TO
from torchedge.exir.source import describe_node
from torchedge.exir.symbolic import is_scalar_call, is_unbounded, upper_bound

__all__ = ["OutVariantPass"]


def _argument(op, name: str):
    return next(a for a in op._schema.arguments if a.name == name)


def _outputs_of(node: torch.fx.Node) -> list:
    val = node.meta.get("val")
    return list(val) if isinstance(val, (tuple, list)) else [val]


class OutVariantPass(PassBase):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target in (operator.getitem, view) or is_scalar_call(node):
                continue
            if is_control_flow(node):  # its sub-graphs get their out variants on their own
                continue
            if is_delegate_call(node):
                self._add_delegate_outputs(graph, node)
                modified = True
                continue
            if not isinstance(node.target, torch._ops.OpOverload):
                raise ExportError(f"cannot emit call to {node.target!r} {describe_node(node)}")
            if is_out_variant(node.target) or is_inplace(node.target) or returns_nothing(node.target):
                continue
            try:
                out_op = out_variant(node.target)
            except ExportError as e:
                raise ExportError(f"{e} {describe_node(node)}") from None
            self._rewrite(graph, node, out_op)
            modified = True
        return PassResult(graph_module, modified)

    @staticmethod
    def _buffers(graph: torch.fx.Graph, node: torch.fx.Node) -> list[torch.fx.Node]:
        """One `alloc` node per output of ``node``, inserted before it."""
        buffers = []
        with graph.inserting_before(node):
            for val in _outputs_of(node):
                # a size with no bound gets its memory at run time (see `TensorSpec.unbounded`)
                shape = tuple(0 if is_unbounded([s]) else upper_bound(s) for s in val.shape)
                buffer = graph.call_function(alloc, (shape, val.dtype))
                buffer.meta["val"] = val
                inherit_debug_info(buffer, node)
                buffers.append(buffer)
        return buffers

    def _add_delegate_outputs(self, graph: torch.fx.Graph, node: torch.fx.Node) -> None:
        node.kwargs = {"out": tuple(self._buffers(graph, node))}

    def _rewrite(self, graph: torch.fx.Graph, node: torch.fx.Node, out_op) -> None:
        bound = bind_arguments(node.target, node.args, node.kwargs)
        target = node.meta.get(OUT_TO)  # a state update writes into the mutated tensor itself
        names = out_argument_names(out_op)
        buffers = [target] if target is not None else self._buffers(graph, node)
        if len(names) == 1 and isinstance(_argument(out_op, names[0]).type, torch.ListType):
            bound[names[0]] = buffers  # one Tensor[] out holding every output
        else:
            bound.update(zip(names, buffers))
        args, kwargs = [], {}
        positional = True
        for schema_arg in out_op._schema.arguments:
            if schema_arg.name not in bound:
                positional = False
            elif positional and not schema_arg.kwarg_only:
                args.append(bound[schema_arg.name])
            else:
                positional = False
                kwargs[schema_arg.name] = bound[schema_arg.name]
        node.target = out_op
        node.args = tuple(args)
        node.kwargs = kwargs
