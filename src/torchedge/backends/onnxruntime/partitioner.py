"""AOT half of the ONNX Runtime backend: partitioner and preprocess."""

from __future__ import annotations

from torch.export import ExportedProgram

from torchedge.backends.onnxruntime.compile_specs import BACKEND_ID, INTRA_OP_THREADS, encode_threads
from torchedge.backends.onnxruntime.lowering import is_supported, lower_exported_program
from torchedge.backends.onnxruntime.payload import write_payload
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
from torchedge.exir.passes.mutable_state import mutations

__all__ = ["OnnxRuntimePartitioner", "OnnxRuntimeBackend"]


class OnnxRuntimeBackend(BackendDetails):
    """Lowers a partition to an ONNX model with torchedge's own lowering (not torch.onnx), its large
    weights stored after the model for the runtime to map (`payload`)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return PreprocessResult(processed_bytes=write_payload(lower_exported_program(edge_program)))


class OnnxRuntimePartitioner(Partitioner):
    """Delegate every maximal group of operators the ONNX lowering handles.

    ``intra_op_threads`` travels to the runtime as a compile spec: the session's thread count
    unless the runtime sets one (``Runtime.get(num_threads=...)``); neither means one thread.
    """

    def __init__(self, intra_op_threads: int | None = None):
        specs = [] if intra_op_threads is None else [CompileSpec(INTRA_OP_THREADS, encode_threads(intra_op_threads))]
        self.delegation_spec = DelegationSpec(BACKEND_ID, specs)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        # State updates stay portable, where they write only the new rows into the buffer itself.
        updates = {m.value for m in mutations(exported_program.graph_signature)}
        infer_symbolic_sizes(exported_program.graph_module)
        tags = tag_supported_partitions(
            exported_program.graph_module,
            lambda node: node.name not in updates and is_supported(node),
            self.delegation_spec,
            prefix="onnxruntime_",
        )
        return PartitionResult(exported_program, tags)
