"""Evaluate at compile time what depends only on constants.

``permute_copy(weight)`` feeding ``addmm``, rotary-embedding tables built from
``arange``, causal masks: anything computed from parameters, buffers, lifted
constants and literals is run once here and stored as a new lifted constant.
The program then neither spends time on it at every run nor plans memory
for it (a transposed LM head alone is megabytes of activation memory).

Every distinct constant is stored once. Constant inputs with equal contents
(the same weight under two names) become one; an identical constant subgraph
(the weight transpose of every step of an unrolled LSTM) is evaluated once; a
folded result equal to another constant reuses it. And where a matrix product's
folded transpose of a weight meets an ``embedding`` reading the same weight (tied
input and output embeddings), the embedding gathers the columns of the transpose,
so that the weight is not stored in both layouts.

Folding never makes the program bigger by storing an operator's result that is larger than
what it reads: an ``expand`` of a weight (matrix products of a batch broadcast their weight)
stays in the graph, and the weight, not its expansion, is stored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ConstantArgument, InputKind, InputSpec, TensorArgument

from torchedge.exir.dialects.quantized import is_dequantize
from torchedge.exir.ir import constant_value
from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.mutable_state import mutable_buffers

__all__ = ["fold_constants", "drop_unused_constants", "constant_input_names", "ConstantContents"]

# A table computed from literals alone (positions, a mask) replaces no stored constant: it is
# stored up to this size. Anything computed from weights is folded only where no operator
# of it yields more bytes than it reads (`_fits`).
MAX_TABLE_BYTES = 1 << 20

aten = torch.ops.aten


def _nbytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 0


def _constant_inputs(ep: ExportedProgram) -> dict[str, torch.Tensor]:
    """Parameters, buffers and lifted constants, except those the program mutates (state)."""
    sig = ep.graph_signature
    state = mutable_buffers(sig)
    values = {}
    for mapping in (sig.inputs_to_parameters, sig.inputs_to_buffers, sig.inputs_to_lifted_tensor_constants):
        for name, fqn in mapping.items():
            if name not in state:
                values[name] = constant_value(ep, fqn)
    return values


def constant_input_names(ep: ExportedProgram) -> set[str]:
    """The placeholders that hold weights: parameters, buffers and lifted constants, not state."""
    return set(_constant_inputs(ep))


class ConstantContents:
    """Tensors by contents: dtype, shape and bytes (so -0.0 differs from 0.0, and equal NaNs
    are equal). Only tensors of a dtype and shape seen before are hashed."""

    def __init__(self) -> None:
        self._groups: dict[tuple, list[list]] = {}  # (dtype, shape) -> [tensor, owner, digest or None]

    @staticmethod
    def _digest(tensor: torch.Tensor) -> bytes:
        data = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
        return hashlib.blake2b(data, digest_size=16).digest()

    def find(self, tensor: torch.Tensor):
        """The owner added with a tensor equal to ``tensor``, or None."""
        digest = None
        for entry in self._groups.get((tensor.dtype, tuple(tensor.shape)), ()):
            if entry[0] is tensor:
                return entry[1]
            digest = digest or self._digest(tensor)
            entry[2] = entry[2] or self._digest(entry[0])
            if entry[2] == digest:
                return entry[1]
        return None

    def add(self, tensor: torch.Tensor, owner) -> None:
        self._groups.setdefault((tensor.dtype, tuple(tensor.shape)), []).append([tensor, owner, None])


def _merge_equal_constants(constants: dict[torch.fx.Node, torch.Tensor], contents: ConstantContents) -> bool:
    """Point the users of every constant placeholder equal to an earlier one at that one
    (the later placeholder is then unused and dropped); returns whether any was merged."""
    merged = False
    for node, value in constants.items():
        first = contents.find(value)
        if first is None:
            contents.add(value, node)
        elif node.users:
            node.replace_all_uses_with(first)
            merged = True
    return merged


def _foldable(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    return (
        isinstance(node.target, torch._ops.OpOverload)
        and torch.Tag.nondeterministic_seeded not in node.target.tags
        and not node.target._schema.is_mutable
        and not is_dequantize(node.target)
    )  # int8 weights stay int8 in the .pte


def _frozen(value):
    """A hashable form of a node's arguments that equals another only for the same arguments:
    lists and dicts become tuples, numbers carry their type (1, 1.0 and True differ), floats
    their bits (0.0 and -0.0 differ, NaN equals NaN)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, float):
        return float, value.hex()
    return type(value), value


def _evaluate(graph: torch.fx.Graph, known: dict[torch.fx.Node, Any]) -> None:
    """Add to ``known`` every node computable from the nodes already in it; a call identical
    to an earlier one (same operator, same arguments) shares its value instead of running again."""
    same: dict[torch.fx.Node, torch.fx.Node] = {}  # node -> the first node computing the same value
    calls: dict[tuple, torch.fx.Node] = {}
    from_weights = set(known)  # the nodes computed from a parameter, buffer or lifted constant
    for node in graph.nodes:
        if node in known or not _foldable(node):
            continue
        inputs = node.all_input_nodes
        if not all(n in known for n in inputs):
            continue
        if any(n in from_weights for n in inputs):
            from_weights.add(node)
        call = (node.target, _frozen(torch.fx.node.map_arg((node.args, node.kwargs), lambda n: same.get(n, n))))
        if call in calls:
            same[node] = calls[call]
            known[node] = known[calls[call]]
            continue
        args = torch.fx.node.map_arg(node.args, lambda n: known[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: known[n])
        with torch.no_grad():
            value = node.target(*args, **kwargs)
        if _fits(value, [known[n] for n in inputs], node in from_weights):
            known[node] = value
            calls[call] = node


def _fits(value, operands: list, from_weights: bool) -> bool:
    """Whether a folded ``value`` may be stored in place of the operator computing it from
    ``operands``: a value computed from weights must take no more bytes than its operands
    (the weight of an ``expand`` is stored, not its expansion); a table computed from
    literals alone, up to `MAX_TABLE_BYTES`."""
    limit = sum(_nbytes(v) for v in operands)
    return _nbytes(value) <= (limit if from_weights else max(limit, MAX_TABLE_BYTES))


def _transposed_weight(node: torch.fx.Node, known: dict) -> torch.fx.Node | None:
    """The 2-D constant placeholder ``node`` transposes, when it is a folded ``permute_copy``
    that the program keeps (some user is not folded)."""
    if node.target is not aten.permute_copy.default or node not in known:
        return None
    weight = node.args[0]
    if (
        not isinstance(weight, torch.fx.Node)
        or weight.op != "placeholder"
        or known.get(weight) is None
        or known[weight].dim() != 2
    ):
        return None
    if [d % 2 for d in node.args[1]] != [1, 0] or all(u in known for u in node.users):
        return None
    return weight


def _gather_from_transposes(graph: torch.fx.Graph, known: dict) -> None:
    """``embedding(W, ids)`` of a weight whose transpose T is folded for a matrix product
    becomes ``permute(index(T, [None, ids]))``: the columns of T, moved last (a gather of
    the looked-up rows only). When embeddings are the weight's only other users, W is then
    no longer stored beside T."""
    for transpose in [n for n in graph.nodes if _transposed_weight(n, known) is not None]:
        weight = transpose.args[0]
        users = [u for u in weight.users if u not in known]
        if not users or any(u.target is not aten.embedding.default or u.args[0] is not weight for u in users):
            continue
        for embedding in users:
            _replace_embedding(graph, embedding, transpose)


def _replace_embedding(graph: torch.fx.Graph, embedding: torch.fx.Node, transpose: torch.fx.Node) -> None:
    indices, table = embedding.args[1].meta["val"], transpose.meta["val"]
    order = list(range(1, indices.dim() + 1)) + [0]
    with graph.inserting_before(embedding):
        columns = graph.call_function(aten.index.Tensor, (transpose, [None, embedding.args[1]]))
        rows = graph.call_function(aten.permute_copy.default, (columns, order))
    # Shapes from the index's own sizes: running the operators on fake tensors would
    # specialise a dynamic size to its example value.
    columns.meta["val"] = table.new_empty((table.shape[0], *indices.shape))
    rows.meta["val"] = table.new_empty((*indices.shape, table.shape[0]))
    for node in (columns, rows):
        inherit_debug_info(node, embedding)
    embedding.replace_all_uses_with(rows)
    graph.erase_node(embedding)


def fold_constants(ep: ExportedProgram) -> ExportedProgram:
    """A copy of ``ep`` in which constant subgraphs are replaced by lifted constants, each
    distinct constant stored once."""
    gm = ep.graph_module
    graph = gm.graph
    by_name = _constant_inputs(ep)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    constants = {n: by_name[n.name] for n in placeholders if n.name in by_name}
    contents = ConstantContents()
    merged = _merge_equal_constants(constants, contents)
    known: dict[torch.fx.Node, object] = {n: v for n, v in constants.items() if n.users}
    _evaluate(graph, known)
    _gather_from_transposes(graph, known)

    # Boundary: folded tensors used by nodes that stay in the graph (or returned).
    boundary = [
        n
        for n in graph.nodes
        if n.op == "call_function"
        and n in known
        and isinstance(known[n], torch.Tensor)
        and any(u not in known for u in n.users)
    ]
    if not boundary:  # nothing to fold; still drop constants nothing uses (merged, or replaced by PT2E)
        unused = any(not n.users for n in constants)
        return drop_unused_constants(ep, gm) if unused or merged else ep
    user_inputs = [n for n in placeholders if n.name in ep.graph_signature.user_inputs]
    anchor = user_inputs[0] if user_inputs else next(n for n in graph.nodes if n.op != "placeholder")
    lifted = dict(ep.constants)
    new_specs = []
    for node in boundary:
        tensor = known[node].contiguous()
        stored = contents.find(tensor)
        if stored is None:
            name = f"_folded_{node.name}"
            with graph.inserting_before(anchor):
                stored = graph.placeholder(name)
            stored.meta = {"val": tensor}
            inherit_debug_info(stored, node)
            contents.add(tensor, stored)
            lifted[name] = tensor
            new_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), target=name))
        node.replace_all_uses_with(stored)
    graph.eliminate_dead_code()
    return _rebuilt(ep, gm, new_specs, lifted)


def drop_unused_constants(ep: ExportedProgram, gm: torch.fx.GraphModule, verifiers=None) -> ExportedProgram:
    """``ep`` rebuilt around ``gm`` without the constant inputs ``gm`` no longer uses."""
    return _rebuilt(ep, gm, [], dict(ep.constants), verifiers)


def _output_specs(ep: ExportedProgram, gm: torch.fx.GraphModule) -> list:
    """Output specs renamed after the nodes the output now returns (passes may replace them)."""
    returned = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return [
        dataclasses.replace(spec, arg=TensorArgument(node.name))
        if isinstance(spec.arg, TensorArgument) and isinstance(node, torch.fx.Node)
        else spec
        for spec, node in zip(ep.graph_signature.output_specs, returned)
    ]


def _named_after(gm: torch.fx.GraphModule, specs: list[InputSpec]) -> list[InputSpec]:
    """Input specs renamed after their placeholders (in order): rebuilding a graph may rename a
    user input that shadows a Python builtin, such as ``input``."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return [
        dataclasses.replace(spec, arg=TensorArgument(node.name))
        if isinstance(spec.arg, TensorArgument) and spec.arg.name != node.name
        else spec
        for spec, node in zip(specs, placeholders)
    ] + specs[len(placeholders) :]


def _rebuilt(
    ep: ExportedProgram, gm: torch.fx.GraphModule, new_specs: list[InputSpec], constants: dict, verifiers=None
) -> ExportedProgram:
    """The program with the new constants inserted before the user inputs and unused inputs dropped."""
    live = {n.name for n in gm.graph.nodes if n.op == "placeholder" and n.users} | set(
        mutable_buffers(ep.graph_signature)
    )
    old = [
        s
        for s in ep.graph_signature.input_specs
        if s.kind == InputKind.USER_INPUT or isinstance(s.arg, ConstantArgument) or s.arg.name in live
    ]
    for node in [n for n in gm.graph.nodes if n.op == "placeholder" and n.name not in live]:
        if any(s.arg.name == node.name for s in ep.graph_signature.input_specs if s.kind != InputKind.USER_INPUT):
            gm.graph.erase_node(node)
    users_start = next((i for i, s in enumerate(old) if s.kind == InputKind.USER_INPUT), len(old))
    input_specs = _named_after(gm, old[:users_start] + new_specs + old[users_start:])
    kept_targets = {s.target for s in input_specs if s.target is not None}
    gm.recompile()
    signature = torch.export.graph_signature.ExportGraphSignature(input_specs, _output_specs(ep, gm))
    return ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=signature,
        state_dict={k: v for k, v in ep.state_dict.items() if k in kept_targets},
        range_constraints=ep.range_constraints,
        module_call_graph=ep.module_call_graph,
        example_inputs=ep.example_inputs,
        constants={k: v for k, v in constants.items() if k in kept_targets},
        verifiers=list(ep.verifiers) if verifiers is None else verifiers,
    )
