"""`XnnpackPartitioner` and `XnnpackBackend`: the AOT half of ExecuTorch's XNNPACK delegate.

The partitioner tags every maximal group of nodes that `lowering.is_supported` accepts (float32
or float16, static shapes or dynamic ones the translation holds for, the operator's own
constraints, or a quantized pattern `ops_quantized` lowers exactly); everything else stays on
portable kernels. Delegates keep their constants in the program's named data, portable nodes in
its constant segment; a large constant both read (a tied embedding table and LM head) is stored once,
the named data's segment lying over the constant's bytes (`torchedge.serialize.pte_writer`).
``XnnpackBackend.preprocess`` lowers one partition to a payload ExecuTorch's runtime loads
under the same backend id.
"""

from __future__ import annotations

import operator
import time

from torch.export import ExportedProgram

# The translations register themselves on import.
from torchedge.backends.xnnpack.aot import ops_elementwise, ops_nn, ops_quantized, ops_quantized_int4, ops_shape  # noqa: F401
from torchedge.backends.xnnpack.aot.lowering import QUANT_HOOKS, SYM_SIZE, is_supported
from torchedge.backends.xnnpack.aot.program import lower_program
from torchedge.backends.xnnpack.aot.quantized_graph import DQ, Q, is_call
from torchedge.backends.xnnpack.aot.quantized_views import requantize_linear_views
from torchedge.errors import ExportError
from torchedge.exir.backend import (
    BackendDetails,
    CompileSpec,
    DelegationSpec,
    Partitioner,
    PartitionResult,
    PreprocessResult,
    tag_supported_partitions,
)
from torchedge.exir.backend.partitioner import TAG_KEY
from torchedge.exir.passes.mutable_state import mutations

__all__ = ["BACKEND_ID", "XnnpackBackend", "XnnpackPartitioner"]

BACKEND_ID = "XnnpackBackend"
_PRECISIONS = {"FP32", "STATIC_QUANT", "DYNAMIC_QUANT"}


class XnnpackBackend(BackendDetails):
    """Lowers a partition to an XNNPACK graph payload (constants inside the payload)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        payload, named_data = lower_program(edge_program)
        return PreprocessResult(processed_bytes=payload, debug_handle_map={}, data_store_output=named_data)


class XnnpackPartitioner(Partitioner):
    """Delegate every maximal group of float32 or float16 operators the XNNPACK lowering handles.

    Quantized graphs (PT2E's ``quantized_decomposed`` patterns: static int8 per tensor and per
    channel, dynamic int8 activations for linear layers) lower as ExecuTorch lowers them
    (`ops_quantized`).

    ExecuTorch's knobs that apply: ``per_op_mode`` (each operator a delegate of its own) and
    ``config_precisions`` (``FP32``, ``STATIC_QUANT``, ``DYNAMIC_QUANT``, ExecuTorch's
    ``ConfigPrecisionType`` or their names: without a quantized one, quantized patterns stay
    outside; anything else is an `ExportError`); ``verbose`` prints what was tagged and how long
    it took.
    """

    def __init__(self, config_precisions=None, per_op_mode: bool = False, verbose: bool = False):
        precisions = config_precisions if isinstance(config_precisions, (list, tuple)) else [config_precisions]
        names = {getattr(p, "name", str(p)).upper() for p in precisions if p is not None}
        if names - _PRECISIONS:
            raise ExportError(
                f"XnnpackPartitioner: config_precisions {sorted(names)}: torchedge lowers {sorted(_PRECISIONS)}"
            )
        self.quantized = not names or bool(names & {"STATIC_QUANT", "DYNAMIC_QUANT"})
        self.float = not names or "FP32" in names
        self.per_op_mode = per_op_mode
        self.verbose = verbose
        self.delegation_spec = DelegationSpec(BACKEND_ID, [])

    def supported_operators(self) -> set[str] | None:
        return None

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        start = time.perf_counter()
        # State updates stay portable, where they write into the buffer itself.
        updates = {m.value for m in mutations(exported_program.graph_signature)}
        gm = exported_program.graph_module
        if self.quantized:
            requantize_linear_views(gm)

        known: dict = {}
        excluded: set = set()

        def supported(node) -> bool:
            if node in excluded:
                return False
            if node not in known:
                in_domain = QUANT_HOOKS.in_domain(node, exported_program)
                wanted = self.quantized if in_domain else self.float
                known[node] = (node.name not in updates and wanted and is_supported(node, exported_program), in_domain)
            return known[node][0]

        while True:
            if self.per_op_mode:
                tags = self._per_op(gm, supported)
            else:
                tags = tag_supported_partitions(gm, supported, self.delegation_spec, prefix="xnnpack_")
            # A quantized pattern must lower whole, in one delegate: leave split ones out, partition again.
            split = _split_islands(gm, supported, known)
            if not split:
                break
            excluded |= split
            for node in gm.graph.nodes:
                node.meta.pop(TAG_KEY, None)
        _own_sizes(gm)
        if self.verbose:
            tagged = sum(1 for n in gm.graph.nodes if TAG_KEY in n.meta)
            print(f"XnnpackPartitioner: {tagged} nodes in {len(tags)} partitions ({time.perf_counter() - start:.3f} s)")
        return PartitionResult(exported_program, tags)

    def _per_op(self, gm, supported) -> dict[str, DelegationSpec]:
        tags: dict[str, DelegationSpec] = {}
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is not operator.getitem and supported(node):
                tag = f"xnnpack_{len(tags)}"
                node.meta[TAG_KEY] = tag
                for user in node.users:
                    if user.op == "call_function" and user.target is operator.getitem:
                        user.meta[TAG_KEY] = tag
                tags[tag] = self.delegation_spec
        return tags


def _split_islands(gm, supported, known: dict) -> set:
    """The nodes of each quantized island (supported nodes of quantized patterns, connected by
    their edges, except a quantize's int8 result read by a dequantize: that value may pass from
    one delegate to another as int8) that the partitioning left in more than one delegate;
    `lowering` translates an island only whole."""
    parent: dict = {}

    def find(node):
        while parent[node] is not node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    members = [n for n in gm.graph.nodes if n.op == "call_function" and supported(n) and known[n][1]]
    for node in members:
        parent[node] = node
    for node in members:
        for arg in node.all_input_nodes:
            if arg in parent and not (is_call(node, DQ) and is_call(arg, Q)):  # int8 may cross delegates
                parent[find(arg)] = find(node)
    tags: dict = {}
    for node in members:
        tags.setdefault(find(node), set()).add(node.meta.get(TAG_KEY))
    broken = {root for root, found in tags.items() if len(found) > 1 or None in found}
    return {node for node in members if find(node) in broken}


def _own_sizes(gm) -> None:
    """Each partition whose reshapes read a dynamic size (``sym_size``) gets a copy of that node
    of its own, so that no size crosses a delegate's boundary (the payload infers it)."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not SYM_SIZE or TAG_KEY in node.meta:
            continue
        by_tag: dict = {}
        for user in list(node.users):
            if TAG_KEY in user.meta:
                by_tag.setdefault(user.meta[TAG_KEY], []).append(user)
        for tag, users in by_tag.items():
            with gm.graph.inserting_after(node):
                copy = gm.graph.call_function(SYM_SIZE, node.args, node.kwargs)
            copy.meta = {**node.meta, TAG_KEY: tag}
            for user in users:
                user.replace_input_with(node, copy)
        if not node.users:
            gm.graph.erase_node(node)
