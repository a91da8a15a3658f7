"""Control flow emitted as ExecuTorch emits it: sub-graphs inline, `JumpFalseCall`s around them.

* ``cond``: jump over the true branch when the predicate is false; the true branch ends with
  a jump over the false branch. Both branches write the call's output values.
* ``map`` / ``scan``: a counted loop. Each iteration copies row ``i`` of every scanned
  operand into the body's input (``select_copy``), runs the body, and stacks its per-row
  results into the call's outputs with ``et_copy_index``; a scan's carried values are
  copied into the call's outputs before the loop and after every iteration.
* ``while_loop``: the carried values are copied into the call's outputs, which the
  condition and the body read; the body's results are copied back after every iteration.

Loops test their bound before the first iteration (an empty ``map`` runs no body) and reset
their counter afterwards, so a method runs the same on every call.
"""

from __future__ import annotations

from torchedge.errors import ExportError, InternalError
from torchedge.exir.control_flow import CALL_OUTPUT, COND, MAP, OPERAND, SCAN, SLICE, branches, operands
from torchedge.exir.emit.value_table import Value
from torchedge.exir.source import describe_node
from torchedge.schema.program import JumpFalseCall

__all__ = ["emit_control_flow"]


def emit_control_flow(emitter, args) -> list[Value]:
    node = emitter.node
    outs = [Value(emitter.table.tensor(spec)) for spec in node.meta["spec"]]
    values = [a if isinstance(a, Value) else Value(emitter.table.literal(a)) for a in operands(node.target, args)]
    bound = {OPERAND: values, CALL_OUTPUT: outs}

    def bindings(branch) -> list[Value]:
        placeholders = [n for n in branch.graph_module.graph.nodes if n.op == "placeholder"]
        return [
            bound[kind][index] if kind in bound else Value(emitter.table.tensor(placeholder.meta["spec"]))
            for placeholder, (kind, index) in zip(placeholders, branch.inputs)
        ]

    subs = branches(node)
    if node.target is COND:
        _emit_cond(emitter, args[0], subs, bindings, outs)
    elif node.target in (MAP, SCAN):
        _emit_counted_loop(emitter, node, subs[0], bindings(subs[0]), values, outs)
    else:
        _emit_while(emitter, subs, bindings, values, outs)
    return outs


def _jump(emitter, condition: int) -> JumpFalseCall:
    """A jump whose destination the caller fills in once it is known."""
    call = JumpFalseCall(cond_value_index=condition, destination_instruction=-1)
    emitter.append(call)
    return call


def _always(emitter) -> int:
    return emitter.table.literal(False)


def _emit_cond(emitter, predicate, subs, bindings, outs) -> None:
    if not isinstance(predicate, Value):
        predicate = Value(emitter.table.literal(bool(predicate)))
    true_branch, false_branch = subs
    to_false = _jump(emitter, predicate.index)
    _emit_branch(emitter, true_branch, bindings, outs)
    to_end = _jump(emitter, _always(emitter))
    to_false.destination_instruction = len(emitter.instructions)
    _emit_branch(emitter, false_branch, bindings, outs)
    to_end.destination_instruction = len(emitter.instructions)


def _emit_branch(emitter, branch, bindings, outs: list[Value]) -> None:
    results = emitter.emit_sub_graph(branch.graph_module, bindings(branch))
    if [r.index for r in results] != [o.index for o in outs]:  # the planner aliased them
        raise InternalError(f"a cond branch does not write the outputs of {describe_node(emitter.node)}")


def _copy(emitter, into: Value, source: Value) -> None:
    emitter.append_call("aten::copy_", "", [into.index, source.index, emitter.table.literal(False), into.index])


def _emit_counted_loop(emitter, node, branch, inputs: list[Value], values: list[Value], outs: list[Value]) -> None:
    """``map``: inputs are (rows of xs, args); ``scan``: (carry, rows of xs, args), outputs (carry, ys)."""
    table = emitter.table
    kinds = [kind for kind, _ in branch.inputs]  # the call's layout, as `branches` reads it
    num_carry, num_xs = kinds.count(CALL_OUTPUT), kinds.count(SLICE)
    xs, rows = values[num_carry : num_carry + num_xs], inputs[num_carry : num_carry + num_xs]
    if not xs:
        raise ExportError(f"{node.target.name()} needs at least one operand to iterate over {describe_node(node)}")
    for carry, init in zip(outs[:num_carry], values[:num_carry]):
        _copy(emitter, carry, init)
    counter, size, more = table.literal(0), table.literal(0), table.literal(False)
    emitter.append_call("aten::sym_size", "int", [xs[0].index, table.literal(0), size])
    top = len(emitter.instructions)
    emitter.append_call("executorch_prim::lt", "Scalar", [counter, size, more])
    to_end = _jump(emitter, more)
    for x, row in zip(xs, rows):
        emitter.append_call("aten::select_copy", "int_out", [x.index, table.literal(0), counter, row.index, row.index])
    results = emitter.emit_sub_graph(branch.graph_module, inputs)
    for carry, result in zip(outs[:num_carry], results[:num_carry]):
        _copy(emitter, carry, result)
    for stacked, result in zip(outs[num_carry:], results[num_carry:]):
        emitter.append_call("executorch_prim::et_copy_index", "tensor", [stacked.index, result.index, counter])
    emitter.append_call("executorch_prim::add", "Scalar", [counter, table.literal(1), counter])
    _jump(emitter, _always(emitter)).destination_instruction = top
    to_end.destination_instruction = len(emitter.instructions)
    emitter.append_call("executorch_prim::sub", "Scalar", [counter, counter, counter])


def _emit_while(emitter, subs, bindings, values: list[Value], outs: list[Value]) -> None:
    condition, body = subs
    for carry, init in zip(outs, values):
        _copy(emitter, carry, init)
    top = len(emitter.instructions)
    (predicate,) = emitter.emit_sub_graph(condition.graph_module, bindings(condition))
    to_end = _jump(emitter, predicate.index)
    results = emitter.emit_sub_graph(body.graph_module, bindings(body))
    for carry, result in zip(outs, results):
        _copy(emitter, carry, result)
    _jump(emitter, _always(emitter)).destination_instruction = top
    to_end.destination_instruction = len(emitter.instructions)
