"""The compile specs the ONNX Runtime backend understands (shared by both halves, no torch)."""

from __future__ import annotations

from torchedge.runtime.threads import DEFAULT_NUM_THREADS, RUNTIME_NUM_THREADS
from torchedge.runtime.threads import decode_num_threads as decode_threads
from torchedge.runtime.threads import encode_num_threads as encode_threads

__all__ = ["BACKEND_ID", "INTRA_OP_THREADS", "encode_threads", "decode_threads", "session_threads"]

BACKEND_ID = "OnnxRuntimeBackend"
INTRA_OP_THREADS = "intra_op_threads"


def session_threads(specs: dict[str, bytes]) -> int:
    """The intra-op threads of a delegate's session: the runtime's explicit ``num_threads`` (the
    method's or the runtime's), else the export-time ``intra_op_threads``, else one."""
    for key in (RUNTIME_NUM_THREADS, INTRA_OP_THREADS):
        if key in specs:
            return decode_threads(specs[key])
    return DEFAULT_NUM_THREADS
