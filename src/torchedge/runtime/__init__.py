"""The NumPy-only runtime: load a `.pte` and execute its methods. Never imports torch."""

from torchedge.kernels.registry import register_kernel
from torchedge.runtime.backend import BackendInterface, register_backend
from torchedge.runtime.data_loader import BufferDataLoader, FileDataLoader, MmapDataLoader
from torchedge.runtime.method import Method
from torchedge.runtime.method_meta import MethodMeta, TensorMeta
from torchedge.runtime.program import Program
from torchedge.runtime.runtime import Runtime

__all__ = [
    "Runtime",
    "Program",
    "Method",
    "MethodMeta",
    "TensorMeta",
    "BufferDataLoader",
    "FileDataLoader",
    "MmapDataLoader",
    "register_kernel",
    "register_backend",
    "BackendInterface",
]
