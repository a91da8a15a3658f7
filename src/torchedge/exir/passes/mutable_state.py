"""Buffer and user-input mutations become writes into the mutated tensor's own memory.

torch.export functionalises ``self.cache.index_put_(idx, k)`` into
``new = index_put(cache, idx, k)`` plus an output marked ``BUFFER_MUTATION``.
ExecuTorch writes ``new`` back with a trailing ``copy_(cache, new)``: the cache
then exists twice in planned memory and is copied whole at every step.

`MutableStatePass` makes the update write into the mutated tensor itself when
that is exact: the chain of operators from the buffer to its new value must
each be able to write over their first argument (``index_put``, ``copy``, the
scatters and same-shape elementwise operators, with the buffer as their ``out``),
and nothing may read the buffer's old value after the chain starts writing. A
KV-cache update then costs the new rows only. Anything else gets ExecuTorch's
write-back ``copy_``. Write-backs of values computed alike (a transformers static cache's
per-layer position counter) copy one value, computed once. Buffer mutations stop being outputs; a
mutated user input stays an output (its new value), as in ExecuTorch.

State belongs to the program, not to one method: a buffer that any method mutates is
state in every method that reads it (an encoder writes the cross-attention cache that the
decoder only reads). `share_state` records that in the reading method's signature as a
mutation of the buffer into itself, so that every later stage (constant folding,
delegation, memory planning, emission) sees state there, never a constant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature, InputKind, OutputKind, OutputSpec, TensorArgument

from torchedge.errors import ExportError
from torchedge.exir import memory
from torchedge.exir.memory_planning.inplace import is_inplace_safe
from torchedge.exir.op_schema import out_variant
from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.same_values import value_key
from torchedge.exir.source import describe_node

__all__ = [
    "Mutation",
    "mutations",
    "mutable_buffers",
    "check_mutations",
    "MutableStatePass",
    "OUT_TO",
    "program_state",
    "share_state",
    "check_unshared_readers",
]

_aten = torch.ops.aten
# Functional ops whose out variant is exact with ``out`` being ``self``: the portable kernels
# then write only the new region; ExecuTorch's copy ``self`` onto itself first.
_OVERWRITING = frozenset(
    {_aten.index_put.default, _aten.copy.default, _aten.slice_scatter.default, _aten.select_scatter.default}
)
# Node meta key: the placeholder an out-variant node must write into instead of a new buffer.
OUT_TO = "out_to"


@dataclass(frozen=True)
class Mutation:
    """The graph writes ``value`` (a node name) into ``target`` (a placeholder name)."""

    target: str
    value: str
    is_buffer: bool
    fqn: str | None  # the buffer's name in the module; None for a user input


_STATE_INPUTS = (InputKind.BUFFER, InputKind.PARAMETER)
_STATE_MUTATIONS = (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION)
_MUTATION_OF = {InputKind.BUFFER: OutputKind.BUFFER_MUTATION, InputKind.PARAMETER: OutputKind.PARAMETER_MUTATION}
MUTATION_OUTPUTS = (*_STATE_MUTATIONS, OutputKind.USER_INPUT_MUTATION)


def mutations(signature: ExportGraphSignature) -> list[Mutation]:
    """Every buffer, parameter and user-input mutation the signature records, in output order.

    A parameter the program writes is state just like a buffer."""
    placeholder_of = {spec.target: spec.arg.name for spec in signature.input_specs if spec.kind in _STATE_INPUTS}
    found = []
    for spec in signature.output_specs:
        if spec.kind in _STATE_MUTATIONS:
            found.append(Mutation(placeholder_of[spec.target], spec.arg.name, True, spec.target))
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            found.append(Mutation(spec.target, spec.arg.name, False, None))
    return found


def mutable_buffers(signature: ExportGraphSignature) -> dict[str, str]:
    """Placeholder name -> fully qualified name of every buffer (or parameter) the program mutates."""
    return {m.target: m.fqn for m in mutations(signature) if m.is_buffer and m.target is not None and m.fqn is not None}


def program_state(programs: Iterable[ExportedProgram]) -> set[str]:
    """Fully qualified names of the buffers (and parameters) that any of ``programs`` writes."""
    return {fqn for ep in programs for fqn in _state_fqns(ep.graph_signature, read_only=False)}


def _state_fqns(signature: ExportGraphSignature, read_only: bool) -> set[str]:
    """Names of the state a method writes, or (``read_only``) only reads (marked by `share_state`)."""
    return {
        m.fqn for m in mutations(signature) if m.is_buffer and m.fqn is not None and (m.value == m.target) == read_only
    }


def share_state(ep: ExportedProgram, state: set[str]) -> ExportedProgram:
    """``ep`` with every buffer of ``state`` (`program_state`) that it reads without writing
    marked as mutated into itself: an output of kind ``BUFFER_MUTATION`` returning the
    placeholder unchanged. The method then holds the buffer as state (planned memory, shared
    with the methods that write it under ``share_mutable_buffers``), as ExecuTorch's planner
    and emitter treat a buffer that another method mutates; `MutableStatePass` drops the output.
    The new program is built around ``ep``'s graph, whose output node is edited in place."""
    sig = ep.graph_signature
    written = set(mutable_buffers(sig).values())
    nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    read = [
        spec
        for spec in sig.input_specs
        if spec.kind in _STATE_INPUTS
        and spec.target in state
        and spec.target not in written
        and nodes[spec.arg.name].users
    ]
    if not read:
        return ep
    marks = [OutputSpec(_MUTATION_OF[s.kind], TensorArgument(s.arg.name), target=s.target) for s in read]
    output = ep.graph.output_node()
    output.args = (tuple(nodes[s.arg.name] for s in read) + tuple(output.args[0]),)
    ep.graph_module.recompile()
    return ExportedProgram(
        root=ep.graph_module,
        graph=ep.graph,
        graph_signature=ExportGraphSignature(list(sig.input_specs), marks + list(sig.output_specs)),
        state_dict=ep.state_dict,
        range_constraints=ep.range_constraints,
        module_call_graph=ep.module_call_graph,
        example_inputs=ep.example_inputs,
        constants=ep.constants,
        verifiers=list(ep.verifiers),
    )


def check_unshared_readers(methods: Mapping[str, ExportedProgram]) -> None:
    """Refuse state that one method writes and another only reads when the methods do not
    share state: each would hold its own copy, and the reader would never see a write
    (ExecuTorch compiles it, and the reader returns the buffer's initial value)."""
    for reader, ep in methods.items():
        read = sorted(_state_fqns(ep.graph_signature, read_only=True))
        if read:
            writers = [n for n, other in methods.items() if read[0] in _state_fqns(other.graph_signature, False)]
            raise ExportError(
                f"method '{reader}' reads buffer '{read[0]}', which method {', '.join(map(repr, writers))} "
                f"mutates: without shared state each method keeps its own copy and '{reader}' would never "
                "see the writes; compile with ExecutorchBackendConfig(memory_planning_pass="
                "MemoryPlanningPass(share_mutable_buffers=True))"
            )


def check_mutations(ep, traced=None) -> None:
    """Every mutation must write a value of the target's own shape and dtype.

    torch.export's functionalisation drops the conversion of ``buffer.copy_(x)`` when ``x``
    has another dtype (the program would compute with ``x`` itself): refuse it instead of
    compiling a wrong program. ``traced`` is the program before decomposition, whose in-place
    call gives the user's source line.
    """
    nodes = {n.name: n for n in ep.graph.nodes}
    for mutation in mutations(ep.graph_signature):
        target, value = nodes[mutation.target], nodes[mutation.value]
        if not _same_tensor_type(value, target):
            what = f"buffer '{mutation.fqn}'" if mutation.is_buffer else f"input '{mutation.target}'"
            t, v = target.meta["val"], value.meta["val"]
            raise ExportError(
                f"the program writes a {v.dtype} value of shape {list(v.shape)} into {what}, a "
                f"{t.dtype} tensor of shape {list(t.shape)} {_writer(traced, mutation) or describe_node(value)}: "
                "convert the value to the buffer's dtype and shape before the in-place write"
            )


def _writer(traced, mutation: Mutation) -> str | None:
    """Where the traced program mutates the target in place (its in-place call), if found."""
    if traced is None:
        return None
    for node in traced.graph.nodes:
        if (
            node.op == "call_function"
            and isinstance(node.target, torch._ops.OpOverload)
            and node.target._schema.is_mutable
            and node.args
            and getattr(node.args[0], "name", None) == mutation.target
        ):
            return describe_node(node)
    return None


def _same_tensor_type(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    va, vb = a.meta.get("val"), b.meta.get("val")
    return (
        isinstance(va, torch.Tensor)
        and isinstance(vb, torch.Tensor)
        and va.dtype == vb.dtype
        and tuple(va.shape) == tuple(vb.shape)
    )


def _writes_over_first_argument(node: torch.fx.Node) -> bool:
    """Whether ``node`` computes exactly the same result when its output overwrites ``args[0]``."""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    op = node.target
    if op in _OVERWRITING:
        return True
    if not isinstance(op, torch._ops.OpOverload) or op._schema.is_mutable:
        return False
    try:
        return is_inplace_safe(out_variant(op)) and _same_tensor_type(node, node.args[0])
    except ExportError:
        return False


def _views(node: torch.fx.Node) -> list[torch.fx.Node]:
    """``node`` and every view that shares its memory (`memory.view` chains)."""
    found = [node]
    for user in node.users:
        if user.target is memory.view:
            found.extend(_views(user))
    return found


def _readers(node: torch.fx.Node) -> list[torch.fx.Node]:
    """Nodes that read ``node``'s memory, directly or through views of it."""
    return [user for alias in _views(node) for user in alias.users if user.target is not memory.view]


def _inplace_chain(target: torch.fx.Node, value: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The nodes from ``target`` to ``value`` if each can write into ``target``'s memory, else None."""
    links = []
    node = value
    while node is not target:
        if not _writes_over_first_argument(node) or not _same_tensor_type(node, target):
            return None
        links.append(node)
        if not isinstance(node.args[0], torch.fx.Node):
            return None
        node = node.args[0]
    links.reverse()
    if any(list(a.users) != [b] for a, b in zip(links, links[1:])):
        return None  # an intermediate value is read elsewhere: it must keep its own memory
    position = {n: i for i, n in enumerate(target.graph.nodes)}
    if any(position[r] >= position[links[0]] and r is not links[0] for r in _readers(target)):
        return None  # something reads the old value after the chain starts overwriting it
    shared = {alias for node in [target, *links] for alias in _views(node)}
    for link in links:  # only its first argument may be the memory a link writes
        rest = list(link.args[1:]) + list(link.kwargs.values())
        if any(a in shared for a in _flat_nodes(rest)):
            return None
    return links


def _flat_nodes(args) -> list[torch.fx.Node]:
    found: list[torch.fx.Node] = []
    torch.fx.node.map_arg(args, found.append)
    return found


class MutableStatePass(PassBase):
    """Turn the mutation outputs of a graph into in-place writes (or ExecuTorch's write-back copies).

    ``reinplace=False`` always uses the write-back ``copy_``, as ExecuTorch does by default.
    After the pass, ``self.write_backs`` names the mutations that needed a copy.
    """

    def __init__(self, signature: ExportGraphSignature, reinplace: bool = True):
        super().__init__()
        self.signature = signature
        self.reinplace = reinplace
        self.write_backs: list[str] = []

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        found = mutations(self.signature)
        if not found:
            return PassResult(graph_module, False)
        graph = graph_module.graph
        nodes = {n.name: n for n in graph.nodes}
        output = graph.output_node()
        returned = list(output.args[0])
        kinds = [spec.kind for spec in self.signature.output_specs]
        replacements = {}
        copies = []
        for mutation in found:
            target, value = nodes[mutation.target], nodes[mutation.value]
            copies += self._write(graph, mutation, target, value)
            replacements[mutation.value] = None if mutation.is_buffer else target
        kept = []
        for node, kind in zip(returned, kinds):
            if kind in MUTATION_OUTPUTS:
                node = replacements[node.name]
            if node is not None:
                kept.append(node)
        output.args = (tuple(kept),)
        _compute_written_values_once(graph, copies)
        return PassResult(graph_module, True)

    def _write(
        self, graph: torch.fx.Graph, mutation: Mutation, target: torch.fx.Node, value: torch.fx.Node
    ) -> list[torch.fx.Node]:
        """Make ``value`` be written into ``target``; the write-back copy it needed, if any."""
        if value is target:
            return []
        what = f"buffer '{mutation.fqn}'" if mutation.is_buffer else f"input '{mutation.target}'"
        if not _same_tensor_type(value, target):
            raise ExportError(
                f"the program writes a value of another shape or dtype into {what} "
                f"{describe_node(value)}: mutations must keep the tensor's shape and dtype"
            )
        chain = _inplace_chain(target, value) if self.reinplace else None
        if chain is None:
            if graph.output_node() in _readers(target):
                raise ExportError(
                    f"the program returns {what} and also mutates it {describe_node(value)}: "
                    "return a .clone() of it instead"
                )
            self.write_backs.append(what)
            with graph.inserting_before(graph.output_node()):
                copy = graph.call_function(_aten.copy_.default, (target, value))
            copy.meta["val"] = target.meta["val"]
            inherit_debug_info(copy, value)
            return [copy]
        for link in chain:
            link.meta[OUT_TO] = target
        return []


def _compute_written_values_once(graph: torch.fx.Graph, copies: list[torch.fx.Node]) -> None:
    """Where several write-back copies write values that compute alike (`value_key`: a
    transformers static cache's per-layer position counter), all copy the first of those values
    in graph order, and the others are gone: the same value computed once, then copied into each
    buffer."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    first: dict = {}
    for value in sorted({copy.args[1] for copy in copies}, key=position.__getitem__):
        key = value_key(value)
        if key is None or graph.output_node() in value.users:  # an output keeps its node (the signature names it)
            continue
        if key not in first:
            first[key] = value
            continue
        value.replace_all_uses_with(first[key])
        graph.erase_node(value)
