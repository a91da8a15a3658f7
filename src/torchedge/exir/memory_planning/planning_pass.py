"""The memory-planning pass: give every planned tensor of a graph a memory id and offset.

Adapts an out-variant graph to the pure functions beside it: it collects one
`TensorSpec` per buffer, computes lifetimes over node order, places them with
`plan_hierarchy` and writes ``mem_id``/``mem_offset`` back onto the specs.
"""

from __future__ import annotations

import operator
from collections.abc import Set

import torch

from torchedge.errors import ExportError
from torchedge.exir.control_flow import (
    CALL_OUTPUT,
    COND,
    OPERAND,
    SLICE,
    branches,
    is_control_flow,
    nested_graph_modules,
    operands,
    stacked_outputs,
)
from torchedge.exir.ir import is_delegate_call
from torchedge.exir.memory import alloc, view
from torchedge.exir.memory_planning.algorithms import DEFAULT_ALGORITHM
from torchedge.exir.memory_planning.allocation import Algorithm, Allocation, align_up, lower_bound
from torchedge.exir.memory_planning.hierarchy import MemorySpec, buffer_sizes, plan_hierarchy
from torchedge.exir.memory_planning.inplace import share_inplace
from torchedge.exir.op_schema import is_inplace
from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.source import describe_node
from torchedge.exir.tensor_spec import TensorSpec
from torchedge.kernels.allocator import ALIGNMENT

__all__ = ["MemoryPlanningPass", "assign_specs", "planned_specs"]


def assign_specs(
    graph_module: torch.fx.GraphModule, constant_names: set[str], state_names: dict[str, str] | None = None
) -> None:
    """Attach ``meta["spec"]`` to every tensor-valued node.

    Out-variant calls share the spec object of the `alloc` node they write, so
    lifetimes computed per spec cover both; in-place calls share their first
    argument's. ``state_names`` maps the placeholders of mutable buffers to their names.
    """
    for node in graph_module.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                node.meta["spec"] = _spec(node, val, const=node.name in constant_names)
                node.meta["spec"].state = (state_names or {}).get(node.name)
        elif node.op == "call_function" and is_inplace(node.target):
            node.meta["spec"] = node.args[0].meta["spec"]
        elif node.op == "call_function" and node.target is alloc:
            node.meta["spec"] = _spec(node, node.meta["val"])
        elif node.op == "call_function" and node.target is view:
            node.meta["spec"] = _spec(node, node.meta["val"])
            node.meta["spec"].base = node.args[0].meta["spec"].placement_owner()
        elif node.op == "call_function" and node.target is operator.getitem:
            parent_spec = node.args[0].meta.get("spec")
            if isinstance(parent_spec, (tuple, list)):
                node.meta["spec"] = parent_spec[node.args[1]]
        elif is_delegate_call(node):
            node.meta["spec"] = tuple(buffer.meta["spec"] for buffer in node.kwargs["out"])
        elif is_control_flow(node):
            if not all(isinstance(val, torch.Tensor) for val in node.meta["val"]):
                raise ExportError(
                    f"{node.target.name()} returns or carries a value that is not a tensor {describe_node(node)}: "
                    "torchedge compiles control flow over tensors"
                )
            node.meta["spec"] = tuple(_spec(node, val) for val in node.meta["val"])
            for spec in stacked_outputs(node, node.meta["spec"]):
                spec.dynamic = True  # et_copy_index grows them row by row (ExecuTorch resizes them)
            _assign_sub_graph_specs(node)
        elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            outs = [
                buffer.meta["spec"]
                for a in node.target._schema.arguments
                if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
                for buffer in _as_list(node.kwargs[a.name])
            ]
            if outs:
                node.meta["spec"] = outs[0] if len(outs) == 1 else tuple(outs)


def _assign_sub_graph_specs(node: torch.fx.Node) -> None:
    """Specs inside the sub-graphs of a control-flow call. An input bound to an operand or to an
    output of the call takes that spec object (one spec, one value); a `cond` branch's outputs
    take the call's output specs, so either branch writes straight into them."""
    bound = {
        OPERAND: [
            a.meta.get("spec") if isinstance(a, torch.fx.Node) else None for a in operands(node.target, node.args)
        ]
    }
    bound[CALL_OUTPUT] = list(node.meta["spec"])
    for branch in branches(node):
        graph_module = branch.graph_module
        assign_specs(graph_module, set())
        placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
        for placeholder, (kind, index) in zip(placeholders, branch.inputs):
            if kind != SLICE and bound[kind][index] is not None:
                _replace_spec(graph_module, placeholder.meta["spec"], bound[kind][index])
        if node.target is COND:
            for out, spec in zip(graph_module.graph.output_node().args[0], node.meta["spec"]):
                _replace_spec(graph_module, out.meta["spec"], spec)


def _replace_spec(graph_module: torch.fx.GraphModule, old: TensorSpec, new: TensorSpec) -> None:
    """Every use of spec ``old`` in the graph and in the sub-graphs it holds becomes ``new``."""
    graphs = [graph_module, *(sub for _, sub in nested_graph_modules(graph_module))]
    for node in (node for graph in graphs for node in graph.graph.nodes):
        spec = node.meta.get("spec")
        if spec is old:
            node.meta["spec"] = new
        elif isinstance(spec, tuple) and any(s is old for s in spec):
            node.meta["spec"] = tuple(new if s is old else s for s in spec)


def _spec(node: torch.fx.Node, val: torch.Tensor, const: bool = False) -> TensorSpec:
    try:
        return TensorSpec.from_tensor(val, const=const)
    except ExportError as e:
        raise ExportError(f"{e} {describe_node(node)}") from None


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _node_specs(node: torch.fx.Node) -> list[TensorSpec]:
    spec = node.meta.get("spec")
    if spec is None:
        return []
    return list(spec) if isinstance(spec, (tuple, list)) else [spec]


def _sub_graph_specs(node: torch.fx.Node) -> list[TensorSpec]:
    specs = []
    for branch in branches(node):
        for sub_node in branch.graph_module.graph.nodes:
            specs += _node_specs(sub_node)
            if is_control_flow(sub_node):
                specs += _sub_graph_specs(sub_node)
    return specs


def _unplanned_graph_io(graph_module: torch.fx.GraphModule, inputs: bool, outputs: bool) -> set[int]:
    """Ids of the specs of graph inputs/outputs that the caller supplies instead of the plan."""
    skip: set[int] = set()
    for node in graph_module.graph.nodes:
        if not inputs and node.op == "placeholder":
            skip.update(id(s.placement_owner()) for s in _node_specs(node) if not s.const and not s.state)
        if not outputs and node.op == "output":  # outputs that are views stay planned with their base
            torch.fx.node.map_arg(
                node.args,
                lambda n: skip.update(
                    id(_static_output(n, s)) for s in _node_specs(n) if s.base is None and not s.const
                ),
            )
    return skip


def _state_specs(graph_module: torch.fx.GraphModule) -> set[int]:
    return {id(s) for node in graph_module.graph.nodes for s in _node_specs(node) if s.state}


def _static_output(node: torch.fx.Node, spec: TensorSpec) -> TensorSpec:
    if spec.dynamic:  # the kernel resizes it within planned memory: a caller's buffer cannot follow
        raise ExportError(
            f"output {describe_node(node)} has a dynamic shape, so it needs planned memory: "
            "compile with alloc_graph_output=True"
        )
    return spec


def planned_specs(graph_module: torch.fx.GraphModule, skip: Set[int] = frozenset()) -> list[tuple[str, TensorSpec]]:
    """Specs that need planned memory, each with the name of the node that writes it.

    ``lifetime`` is filled in (node indices): a tensor lives from the node that
    defines it to its last user; graph outputs live to the end of the program.
    A view's uses extend its base's lifetime; the view itself needs no bytes.
    """
    nodes = list(graph_module.graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    specs: dict[int, TensorSpec] = {}
    writers: dict[int, torch.fx.Node] = {}
    for index, node in enumerate(nodes):
        node_specs = _node_specs(node)
        if is_control_flow(node):  # what its sub-graphs hold lives while the call runs
            node_specs += _sub_graph_specs(node)
        for spec in (s.placement_owner() for s in node_specs):
            if spec.const or spec.unbounded or id(spec) in skip:
                continue
            if id(spec) not in specs:
                specs[id(spec)] = spec
                spec.lifetime = [index, index]
            if id(spec) not in writers or writers[id(spec)].target is alloc:
                writers[id(spec)] = node
            last_use = max((position[user] for user in node.users), default=index)
            spec.lifetime[1] = max(spec.lifetime[1], last_use)
    for spec in specs.values():
        if spec.state:  # persists from one run to the next: its bytes are never free
            spec.lifetime = [0, len(nodes) - 1]
    return [(writers[key].name, spec) for key, spec in specs.items()]


class MemoryPlanningPass(PassBase):
    """Give every non-constant tensor a memory id and an offset.

    ``algorithm`` plans one memory (default: the best of torchedge's planners); ``alignment``
    is the byte multiple of every offset (default 64, a cache line, where the runtime's arenas
    start: ExecuTorch's default of 16 leaves half the tensors 16 bytes off a 32-byte boundary,
    and NumPy's AVX2 loops run measurably slower over those);
    ``memories`` lists the memory ids to fill, small fast ones first (default:
    one unbounded memory, id 1). The graph's ``meta["non_const_buffer_sizes"]``
    gets the arena size per memory id; ``self.lower_bound`` the largest total of
    simultaneously live bytes. With ``alloc_graph_input``/``alloc_graph_output``
    False, user inputs/outputs get no planned memory: the caller supplies it at
    execution time (ExecuTorch's options of the same names). With ``inplace``,
    elementwise operators may write over an input that dies there (`inplace`).

    Mutable buffers (state) keep their bytes for the whole run and across runs.
    With ``share_mutable_buffers`` (ExecuTorch's option), they are left out of each
    method's plan and `place_shared_state` puts every method's copy of a buffer
    at one offset of memory id 2, so methods such as ``prefill`` and ``decode``
    of one program see one KV cache.
    """

    def __init__(
        self,
        algorithm: Algorithm = DEFAULT_ALGORITHM,
        alignment: int = ALIGNMENT,
        memories: list[MemorySpec] | None = None,
        alloc_graph_input: bool = True,
        alloc_graph_output: bool = True,
        inplace: bool = True,
        share_mutable_buffers: bool = False,
    ):
        super().__init__()
        self.share_mutable_buffers = share_mutable_buffers
        self.inplace = inplace
        self.alloc_graph_input = alloc_graph_input
        self.alloc_graph_output = alloc_graph_output
        self.algorithm = algorithm
        self.alignment = alignment
        self.memories = [MemorySpec(1)] if memories is None else memories
        self.lower_bound = 0

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        skip = _unplanned_graph_io(graph_module, self.alloc_graph_input, self.alloc_graph_output)
        if self.inplace:  # state never lends its bytes to another tensor
            share_inplace(graph_module, skip | _state_specs(graph_module))
        named = planned_specs(graph_module, skip | _state_specs(graph_module) if self.share_mutable_buffers else skip)
        allocations = [Allocation(s.nbytes, s.lifetime[0], s.lifetime[1]) for _, s in named]
        placement = plan_hierarchy(
            allocations,
            self.memories,
            self.alignment,
            self.algorithm,
            names=[f"the output of node '{name}'" for name, _ in named],
        )
        self.lower_bound = lower_bound(allocations, self.alignment)
        for (_, spec), (mem_id, offset) in zip(named, placement):
            spec.mem_id = mem_id
            spec.mem_offset = offset
        _place_views(graph_module)
        graph_module.meta["non_const_buffer_sizes"] = buffer_sizes(
            allocations, placement, self.memories, self.alignment
        )
        return PassResult(graph_module, True)

    def place_shared_state(self, graph_modules: list[torch.fx.GraphModule]) -> None:
        """Give each mutable buffer one offset in memory id 2, the same in every method (after `call`)."""
        placed: dict[str, TensorSpec] = {}
        size = 0
        for graph_module in graph_modules:
            sizes = graph_module.meta["non_const_buffer_sizes"]
            if len(sizes) != 2:
                raise ExportError(
                    "share_mutable_buffers needs the default single memory (id 1) for "
                    f"activations; the plan has {len(sizes) - 1} memories"
                )
            for spec in {id(s): s for n in graph_module.graph.nodes for s in _node_specs(n) if s.state}.values():
                first = placed.setdefault(spec.state, spec)
                if first is spec:
                    spec.mem_id, spec.mem_offset = 2, align_up(size, self.alignment)
                    size = spec.mem_offset + spec.nbytes
                elif (first.shape, first.dtype) != (spec.shape, spec.dtype):
                    raise ExportError(
                        f"mutable buffer '{spec.state}' is {first.dtype}{list(first.shape)} in one "
                        f"method and {spec.dtype}{list(spec.shape)} in another: it cannot be shared"
                    )
                else:
                    spec.mem_id, spec.mem_offset = 2, first.mem_offset
            _place_views(graph_module)
        for graph_module in graph_modules:
            graph_module.meta["non_const_buffer_sizes"].append(align_up(size, self.alignment))


def _place_views(graph_module: torch.fx.GraphModule) -> None:
    """Views live at their base's place."""
    for node in graph_module.graph.nodes:
        for spec in _node_specs(node):
            if spec.base is not None and spec.base.mem_id is not None:
                spec.mem_id, spec.mem_offset = spec.base.mem_id, spec.base.mem_offset
