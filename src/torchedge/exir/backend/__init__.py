"""Backend delegation, AOT side: partitioners, preprocess, lowering."""

from torchedge.exir.backend.backend_details import BackendDetails, PreprocessResult
from torchedge.exir.backend.capability import tag_supported_partitions
from torchedge.exir.backend.compile_spec import CompileSpec
from torchedge.exir.backend.lowered_module import LoweredBackendModule
from torchedge.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from torchedge.exir.backend.to_backend import to_backend
from torchedge.exir.ir import executorch_call_delegate

__all__ = [
    "BackendDetails",
    "PreprocessResult",
    "CompileSpec",
    "DelegationSpec",
    "Partitioner",
    "PartitionResult",
    "LoweredBackendModule",
    "executorch_call_delegate",
    "tag_supported_partitions",
    "to_backend",
]
