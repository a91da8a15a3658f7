"""AOT half of the ONNX Runtime backend: partitioner and preprocess."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from torchedge.backends.onnxruntime.common_values import merge_common_values
from torchedge.backends.onnxruntime.compile_specs import BACKEND_ID, INTRA_OP_THREADS, encode_threads
from torchedge.backends.onnxruntime.lowering import is_supported, lower_exported_program
from torchedge.backends.onnxruntime.payload import EXTERNAL_BYTES, write_payload
from torchedge.backends.onnxruntime.symbolic_sizes import infer_symbolic_sizes
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
from torchedge.exir.ir import constant_value
from torchedge.exir.passes.mutable_state import mutable_buffers, mutations

__all__ = ["OnnxRuntimePartitioner", "OnnxRuntimeBackend"]

_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


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
    (a tied embedding table and LM head, say).

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
        constants = _large_constants(exported_program)
        portable = {node for node in exported_program.graph.nodes if node.name in updates}
        while True:
            tags = self._tag(exported_program.graph_module, frozenset(portable))
            shared = _readers_of_shared(constants)
            if not shared:
                return PartitionResult(exported_program, tags)
            portable |= shared

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


def _large_constants(ep: ExportedProgram) -> list[torch.fx.Node]:
    """The placeholders of the parameters, buffers and lifted constants a payload would store raw."""
    state = mutable_buffers(ep.graph_signature)
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    return [
        placeholders[spec.arg.name]
        for spec in ep.graph_signature.input_specs
        if spec.kind in _CONSTANT_KINDS
        and spec.arg.name not in state
        and isinstance(value := constant_value(ep, spec.target), torch.Tensor)
        and value.nbytes >= EXTERNAL_BYTES
    ]


def _readers_of_shared(constants: list[torch.fx.Node]) -> set[torch.fx.Node]:
    """The delegated readers of each constant that portable nodes read too (delegates of one
    program share a weight through its named data, so partitions may share one)."""
    readers: set[torch.fx.Node] = set()
    for constant in constants:
        tags = {user.meta.get(TAG_KEY) for user in constant.users}
        if None in tags and len(tags) > 1:
            readers.update(user for user in constant.users if user.meta.get(TAG_KEY) is not None)
    return readers
