"""Evaluate at compile time what depends only on constants.

``permute_copy(weight)`` feeding ``addmm``, rotary-embedding tables built from
``arange``, causal masks: anything computed from parameters, buffers, lifted
constants and literals is run once here and stored as a new lifted constant.
The program then neither spends time on it at every run nor plans memory
for it (a transposed LM head alone is megabytes of activation memory).
"""

from __future__ import annotations

import dataclasses
import operator

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ConstantArgument, InputKind, InputSpec, TensorArgument

from torchedge.exir.dialects.quantized import is_dequantize
from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.mutable_state import mutable_buffers

__all__ = ["fold_constants", "drop_unused_constants"]

# A folded result may be larger than the constants it came from (an expand, a
# mask built from nothing) only up to this size, so that folding never bloats
# the .pte much.
MAX_GROWTH_BYTES = 1 << 20


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
                values[name] = ep.state_dict[fqn] if fqn in ep.state_dict else ep.constants[fqn]
    return values


def _foldable(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    return (isinstance(node.target, torch._ops.OpOverload)
            and torch.Tag.nondeterministic_seeded not in node.target.tags
            and not node.target._schema.is_mutable
            and not is_dequantize(node.target))  # int8 weights stay int8 in the .pte


def _evaluate(graph: torch.fx.Graph, known: dict[torch.fx.Node, object]) -> None:
    """Add to ``known`` every node computable from the nodes already in it."""
    for node in graph.nodes:
        if node in known or not _foldable(node):
            continue
        inputs = node.all_input_nodes
        if not all(n in known for n in inputs):
            continue
        args = torch.fx.node.map_arg(node.args, lambda n: known[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: known[n])
        with torch.no_grad():
            value = node.target(*args, **kwargs)
        source_bytes = sum(_nbytes(known[n]) for n in inputs)
        if _nbytes(value) <= max(source_bytes, MAX_GROWTH_BYTES):
            known[node] = value


def fold_constants(ep: ExportedProgram) -> ExportedProgram:
    """A copy of ``ep`` in which constant subgraphs are replaced by lifted constants."""
    gm = ep.graph_module
    graph = gm.graph
    by_name = _constant_inputs(ep)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    known: dict[torch.fx.Node, object] = {n: by_name[n.name] for n in placeholders if n.name in by_name}
    _evaluate(graph, known)

    # Boundary: folded tensors used by nodes that stay in the graph (or returned).
    boundary = [n for n in graph.nodes if n.op == "call_function" and n in known
                and isinstance(known[n], torch.Tensor) and any(u not in known for u in n.users)]
    if not boundary:  # nothing to fold; still drop constants nothing uses (float weights PT2E replaced)
        unused = any(not n.users for n in placeholders if n.name in by_name)
        return drop_unused_constants(ep, gm) if unused else ep
    user_inputs = [n for n in placeholders if n.name in ep.graph_signature.user_inputs]
    anchor = user_inputs[0] if user_inputs else next(n for n in graph.nodes if n.op != "placeholder")
    constants = dict(ep.constants)
    new_specs = []
    for node in boundary:
        name = f"_folded_{node.name}"
        with graph.inserting_before(anchor):
            placeholder = graph.placeholder(name)
        tensor = known[node].contiguous()
        placeholder.meta = {"val": tensor}
        inherit_debug_info(placeholder, node)
        node.replace_all_uses_with(placeholder)
        constants[name] = tensor
        new_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), target=name))
    graph.eliminate_dead_code()
    return _rebuilt(ep, gm, new_specs, constants)


def drop_unused_constants(ep: ExportedProgram, gm: torch.fx.GraphModule, verifiers=None) -> ExportedProgram:
    """``ep`` rebuilt around ``gm`` without the constant inputs ``gm`` no longer uses."""
    return _rebuilt(ep, gm, [], dict(ep.constants), verifiers)


def _output_specs(ep: ExportedProgram, gm: torch.fx.GraphModule) -> list:
    """Output specs renamed after the nodes the output now returns (passes may replace them)."""
    returned = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return [dataclasses.replace(spec, arg=TensorArgument(node.name))
            if isinstance(spec.arg, TensorArgument) and isinstance(node, torch.fx.Node) else spec
            for spec, node in zip(ep.graph_signature.output_specs, returned)]


def _named_after(gm: torch.fx.GraphModule, specs: list[InputSpec]) -> list[InputSpec]:
    """Input specs renamed after their placeholders (in order): rebuilding a graph may rename a
    user input that shadows a Python builtin, such as ``input``."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return [dataclasses.replace(spec, arg=TensorArgument(node.name))
            if isinstance(spec.arg, TensorArgument) and spec.arg.name != node.name else spec
            for spec, node in zip(specs, placeholders)] + specs[len(placeholders):]


def _rebuilt(ep: ExportedProgram, gm: torch.fx.GraphModule, new_specs: list[InputSpec],
             constants: dict, verifiers=None) -> ExportedProgram:
    """The program with the new constants inserted before the user inputs and unused inputs dropped."""
    live = {n.name for n in gm.graph.nodes if n.op == "placeholder" and n.users} | set(mutable_buffers(ep.graph_signature))
    old = [s for s in ep.graph_signature.input_specs
           if s.kind == InputKind.USER_INPUT or isinstance(s.arg, ConstantArgument) or s.arg.name in live]
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
