"""AOT half of the ONNX Runtime backend: partitioner and preprocess."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from torchedge.backends.onnxruntime.common_values import merge_common_values
from torchedge.backends.onnxruntime.compile_specs import BACKEND_ID, INTRA_OP_THREADS, encode_threads
from torchedge.backends.onnxruntime.grouped_attention import group_attention_heads
from torchedge.backends.onnxruntime.lowbit import NAMESPACE
from torchedge.backends.onnxruntime.lowering import is_supported, lower_exported_program
from torchedge.backends.onnxruntime.payload import EXTERNAL_BYTES, write_payload
from torchedge.backends.onnxruntime.rotary import NAMESPACE as ROTARY_NAMESPACE
from torchedge.backends.onnxruntime.rotary import use_rotary_kernel
from torchedge.backends.onnxruntime.symbolic_sizes import infer_symbolic_sizes
from torchedge.errors import InternalError
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
from torchedge.exir.backend.shared_constants import delegated_readers_of_portable_constants, large_constants
from torchedge.exir.passes.mutable_state import mutations

__all__ = ["OnnxRuntimePartitioner", "OnnxRuntimeBackend"]


class OnnxRuntimeBackend(BackendDetails):
    """Lowers a partition to an ONNX model with torchedge's own lowering (not torch.onnx), its large
    weights stored in the program's named data by SHA-256 (once per program) for the runtime to map
    (`payload`)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        payload, named_data = write_payload(lower_exported_program(edge_program))
        return PreprocessResult(processed_bytes=payload, data_store_output=named_data)


class OnnxRuntimePartitioner(Partitioner):
    """Delegate every maximal group of operators the ONNX lowering handles.

    Delegates store their large constants in the program's named data, once per program, but a
    portable node reads its constants from the program's own buffers: a delegated node reading a
    large constant that a portable node also reads stays portable, so the weight is stored once
    (a tied embedding table and LM head, say); a low-bit linear stays delegated (it has no portable
    kernel). Where a delegate's output has a symbolic size none of its inputs has (``2*s``), the
    node that makes that size stays portable: the runtime sizes a delegate's outputs by name from
    its inputs' sizes.

    ``intra_op_threads`` travels to the runtime as a compile spec: the session's thread count
    unless the runtime sets one (``Runtime.get(num_threads=...)``); neither means one thread.
    """

    def __init__(self, intra_op_threads: int | None = None):
        specs = [] if intra_op_threads is None else [CompileSpec(INTRA_OP_THREADS, encode_threads(intra_op_threads))]
        self.delegation_spec = DelegationSpec(BACKEND_ID, specs)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        # State updates stay portable, where they write only the new rows into the buffer itself.
        updates = {m.value for m in mutations(exported_program.graph_signature)}
        merge_common_values(exported_program.graph_module)
        infer_symbolic_sizes(exported_program.graph_module)
        group_attention_heads(exported_program.graph_module)
        use_rotary_kernel(exported_program.graph_module)
        constants = large_constants(exported_program, EXTERNAL_BYTES)
        portable = {node for node in exported_program.graph.nodes if node.name in updates}
        while True:
            tags = self._tag(exported_program.graph_module, frozenset(portable))
            # Low-bit linears have no portable kernel, and their delegate stores the weight packed.
            shared = delegated_readers_of_portable_constants(constants, must_delegate=_has_no_portable_kernel)
            moved = shared | _makers_of_unknown_sizes(exported_program.graph)
            if not moved:
                _check_delegated(exported_program.graph)
                return PartitionResult(exported_program, tags)
            portable |= moved

    def _tag(self, graph_module: torch.fx.GraphModule, portable: frozenset) -> dict[str, DelegationSpec]:
        """Tag the partitions of the supported nodes not in ``portable``, dropping an earlier try's tags."""
        for node in graph_module.graph.nodes:
            node.meta.pop(TAG_KEY, None)
        return tag_supported_partitions(
            graph_module,
            lambda node: node not in portable and is_supported(node),
            self.delegation_spec,
            prefix="onnxruntime_",
        )


def _has_no_portable_kernel(node: torch.fx.Node) -> bool:
    """Low-bit linears and the rotary embedding (`rotary`) run only on ONNX Runtime."""
    return getattr(node.target, "namespace", None) in (NAMESPACE, ROTARY_NAMESPACE)


def _check_delegated(graph: torch.fx.Graph) -> None:
    """`use_rotary_kernel` writes only rotary calls the lowering supports: each is delegated."""
    rotary = [n for n in graph.nodes if getattr(n.target, "namespace", None) == ROTARY_NAMESPACE]
    left = [n.name for n in rotary if n.meta.get(TAG_KEY) is None]
    if left:
        raise InternalError(f"{left} have no portable kernel but were left out of every ONNX Runtime delegate")


def _makers_of_unknown_sizes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """For each delegated node read outside its delegate with a symbolic size none of the
    delegate's inputs has (``2*s``, made inside), the delegated nodes that make that size from
    inputs without it: the runtime sizes a delegate's outputs by name from its inputs' sizes."""
    inputs: dict[str, set[str]] = {}  # tag -> the named sizes of its inputs
    for node in graph.nodes:
        for user in node.users:
            tag = user.meta.get(TAG_KEY)
            if tag is not None and node.meta.get(TAG_KEY) != tag:
                inputs.setdefault(tag, set()).update(_named_sizes(node))
    unknown: dict[str, set[str]] = {}  # tag -> the sizes its outputs have and its inputs lack
    for node in graph.nodes:
        tag = node.meta.get(TAG_KEY)
        if tag is not None and any(user.op == "output" or user.meta.get(TAG_KEY) != tag for user in node.users):
            unknown.setdefault(tag, set()).update(_named_sizes(node) - inputs.get(tag, set()))
    return {
        node
        for node in graph.nodes
        if (sizes := unknown.get(node.meta.get(TAG_KEY), set()) & _named_sizes(node))
        and not any(sizes & _named_sizes(n) for n in node.all_input_nodes)
    }


def _named_sizes(node: torch.fx.Node) -> set[str]:
    val = node.meta.get("val")
    values = val if isinstance(val, (list, tuple)) else [val]
    return {str(s) for v in values if isinstance(v, torch.Tensor) for s in v.shape if not isinstance(s, int)}
