"""`to_backend`: lower a whole Edge program, or the partitions a partitioner tagged.

Each tagged partition is cut out into an Edge program of its own (its
constants move with it), handed to the backend's ``preprocess``, and replaced
in the parent graph by one ``executorch_call_delegate`` node whose outputs are
read with ``getitem``.
"""

from __future__ import annotations

import copy
import operator
import types

import torch
from torch._export.verifier import Verifier
from torch.export import ExportedProgram
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch.fx.passes.tools_common import legalize_graph

from torchedge.errors import ExportError
from torchedge.exir.backend.backend_details import backend_by_id
from torchedge.exir.backend.compile_spec import CompileSpec
from torchedge.exir.backend.lowered_module import LoweredBackendModule
from torchedge.exir.backend.partitioner import TAG_KEY, Partitioner
from torchedge.exir.ir import executorch_call_delegate
from torchedge.exir.passes.constant_folding import drop_unused_constants
from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.fusion_matching import take_over_results
from torchedge.exir.passes.mutable_state import mutable_buffers

__all__ = ["to_backend", "lower_whole_program", "DelegatedProgramVerifier"]


class DelegatedProgramVerifier(Verifier):
    """torch.export's checks, admitting delegate calls and the lowered modules they read."""

    dialect = "TORCHEDGE_DELEGATED"

    def allowed_op_types(self):
        return (*super().allowed_op_types(), types.FunctionType)

    def allowed_getattr_types(self):
        return (*super().allowed_getattr_types(), LoweredBackendModule)


def lower_whole_program(
    backend_id: str, edge_program: ExportedProgram, compile_specs: list[CompileSpec]
) -> LoweredBackendModule:
    """Preprocess a whole Edge program with one backend."""
    result = backend_by_id(backend_id).preprocess(edge_program, list(compile_specs))
    return LoweredBackendModule(
        backend_id,
        result.processed_bytes,
        compile_specs,
        edge_program,
        result.debug_handle_map,
        result.data_store_output,
    )


def to_backend(*args):
    """``to_backend(backend_id, edge_program, compile_specs) -> LoweredBackendModule`` or
    ``to_backend(edge_program, partitioner) -> ExportedProgram`` with delegated partitions."""
    if len(args) == 3 and isinstance(args[0], str):
        return lower_whole_program(*args)
    if len(args) == 2 and isinstance(args[1], Partitioner):
        return _lower_partitions(*args)
    raise TypeError("to_backend(backend_id, edge_program, compile_specs) or to_backend(edge_program, partitioner)")


def _constant_specs(ep: ExportedProgram) -> dict[str, InputSpec]:
    """Placeholder name -> input spec of every parameter, buffer and lifted constant.

    Buffers the program mutates are state, not constants: a delegate reads them at run time.
    """
    state = mutable_buffers(ep.graph_signature)
    return {
        s.arg.name: s
        for s in ep.graph_signature.input_specs
        if s.kind != InputKind.USER_INPUT and isinstance(s.arg, TensorArgument) and s.arg.name not in state
    }


def _tag_getitems(graph: torch.fx.Graph) -> None:
    for node in graph.nodes:
        if node.op == "call_function" and node.target is operator.getitem and TAG_KEY in node.args[0].meta:
            node.meta[TAG_KEY] = node.args[0].meta[TAG_KEY]


def _partition_program(ep: ExportedProgram, nodes: list[torch.fx.Node], constants: dict):
    """An Edge program holding just ``nodes``; returns it, its runtime inputs and its outputs."""
    members = set(nodes)
    inputs = []
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg not in members and arg not in inputs:
                inputs.append(arg)
    outputs = [n for n in nodes if any(u not in members for u in n.users)]
    const_inputs = [n for n in inputs if n.name in constants]
    user_inputs = [n for n in inputs if n.name not in constants]

    graph = torch.fx.Graph()
    env = {}
    for node in const_inputs + user_inputs:
        env[node] = graph.placeholder(node.name)
        env[node].meta = copy.copy(node.meta)
    for node in nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[n] for n in outputs))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)

    input_specs = [constants[n.name] for n in const_inputs]
    input_specs += [InputSpec(InputKind.USER_INPUT, TensorArgument(n.name), target=None) for n in user_inputs]
    output_specs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(env[n].name), target=None) for n in outputs]
    fqns = {constants[n.name].target for n in const_inputs}
    program = ExportedProgram(
        root=module,
        graph=module.graph,
        graph_signature=ExportGraphSignature(input_specs, output_specs),
        state_dict={k: v for k, v in ep.state_dict.items() if k in fqns},
        range_constraints={},
        module_call_graph=[],
        constants={k: v for k, v in ep.constants.items() if k in fqns},
    )
    return program, user_inputs, outputs


def _lower_partitions(edge_program: ExportedProgram, partitioner: Partitioner) -> ExportedProgram:
    ep = copy.deepcopy(edge_program, {id(t): t for t in {**edge_program.state_dict, **edge_program.constants}.values()})
    result = partitioner.partition(ep)
    ep = result.tagged_exported_program
    gm = ep.graph_module
    _tag_getitems(gm.graph)
    constants = _constant_specs(ep)
    for index, (tag, spec) in enumerate(result.partition_tags.items()):
        nodes = [n for n in gm.graph.nodes if n.meta.get(TAG_KEY) == tag]
        if not nodes:
            continue
        program, user_inputs, outputs = _partition_program(ep, nodes, constants)
        try:
            lowered = lower_whole_program(spec.backend_id, program, spec.compile_specs)
        except ExportError:
            raise
        except Exception as e:
            raise ExportError(f"backend '{spec.backend_id}' failed to preprocess partition '{tag}': {e}") from e
        _replace_with_delegate(gm, f"lowered_module_{index}", lowered, nodes, user_inputs, outputs)
    legalize_graph(gm)  # delegate calls sit after their last output: restore a topological order
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return drop_unused_constants(ep, gm, verifiers=[DelegatedProgramVerifier])


def _replace_with_delegate(gm, name, lowered, nodes, user_inputs, outputs) -> None:
    graph = gm.graph
    gm.add_submodule(name, lowered)
    anchor = outputs[-1] if outputs else nodes[-1]
    with graph.inserting_after(anchor):
        module_node = graph.get_attr(name)
    with graph.inserting_after(module_node):
        call = graph.call_function(executorch_call_delegate, (module_node, *user_inputs))
    call.meta["val"] = tuple(n.meta["val"] for n in outputs)
    inherit_debug_info(call, nodes[0])
    take_over_results(graph, call, outputs)
    for node in reversed(nodes):
        if not node.users:
            graph.erase_node(node)
