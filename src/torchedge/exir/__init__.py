"""The ahead-of-time compiler: `nn.Module` -> `.pte` (needs torch)."""

from torchedge.exir.backend_dialect import bind_pattern_to_op
from torchedge.exir.config import EdgeCompileConfig, ExecutorchBackendConfig
from torchedge.exir.program import EdgeProgramManager, ExecutorchProgramManager, to_edge, to_edge_transform_and_lower

__all__ = [
    "to_edge",
    "to_edge_transform_and_lower",
    "EdgeProgramManager",
    "ExecutorchProgramManager",
    "EdgeCompileConfig",
    "ExecutorchBackendConfig",
    "bind_pattern_to_op",
]
