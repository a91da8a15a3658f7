"""The ahead-of-time compiler: `nn.Module` -> `.pte` (needs torch)."""

from torchedge.exir.config import EdgeCompileConfig, ExecutorchBackendConfig
from torchedge.exir.program import EdgeProgramManager, ExecutorchProgramManager, to_edge

__all__ = [
    "to_edge",
    "EdgeProgramManager",
    "ExecutorchProgramManager",
    "EdgeCompileConfig",
    "ExecutorchBackendConfig",
]
