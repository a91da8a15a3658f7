"""The compile specs the ONNX Runtime backend understands (shared by both halves, no torch)."""

from __future__ import annotations

__all__ = ["BACKEND_ID", "INTRA_OP_THREADS", "encode_threads", "decode_threads"]

BACKEND_ID = "OnnxRuntimeBackend"
INTRA_OP_THREADS = "intra_op_threads"


def encode_threads(threads: int) -> bytes:
    return int(threads).to_bytes(4, "little")


def decode_threads(value: bytes) -> int:
    return int.from_bytes(value, "little")
