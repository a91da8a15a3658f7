"""The ONNX Runtime backend: torchedge's own Edge -> ONNX lowering, run by ONNX Runtime.

AOT: ``OnnxRuntimePartitioner(intra_op_threads=None)`` (imports torch and onnx).
Runtime: `torchedge.backends.onnxruntime.runtime` registers backend id
``"OnnxRuntimeBackend"`` (NumPy and onnxruntime only); the runtime imports it
on first use of the id, found through the ``torchedge.backends`` entry point
that pyproject.toml declares.
"""

__all__ = ["OnnxRuntimePartitioner", "OnnxRuntimeBackend", "BACKEND_ID"]

from torchedge.backends.onnxruntime.compile_specs import BACKEND_ID


def __getattr__(name):
    # The AOT names import torch: load them only when asked for, so the runtime half stays torch-free.
    if name in ("OnnxRuntimePartitioner", "OnnxRuntimeBackend"):
        from torchedge.backends.onnxruntime import partitioner

        return getattr(partitioner, name)
    raise AttributeError(name)
