"""The delegate payload: an ONNX model whose large initializers sit after it, raw, so that the
runtime hands ONNX Runtime arrays over the payload's own bytes (memory-mapped with the .pte)
instead of having it parse and copy them out of the protobuf.

Layout: ``MAGIC``, the model's size and the table's size (little-endian uint64), the model
(its large initializers declared with external data, no bytes), the table (JSON: ``[name,
dtype, shape, offset]`` per initializer), then, from the next multiple of `ALIGNMENT`, each
initializer's bytes at that offset (a multiple of `ALIGNMENT` too) from there. A payload without
``MAGIC`` is a plain ONNX model. NumPy only (the writer takes the ``onnx`` package's model).
"""

from __future__ import annotations

import json
import struct

import numpy as np

from torchedge.errors import InvalidProgramError

__all__ = ["MAGIC", "ALIGNMENT", "EXTERNAL_BYTES", "write_payload", "read_payload"]

MAGIC = b"TEORTX01"
ALIGNMENT = 64
EXTERNAL_BYTES = 1024  # initializers at least this large are stored outside the protobuf
_HEADER = struct.Struct("<8sQQ")
_LOCATION = "torchedge-payload"  # the external data location the model names (never a file)
# ONNX TensorProto data types <-> NumPy dtype names
_DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
}


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def write_payload(model) -> bytes:
    """``model`` (an ``onnx.ModelProto``, changed in place) with its large raw initializers moved after it."""
    from onnx import TensorProto

    moved = []
    for tensor in model.graph.initializer:
        if tensor.data_type in _DTYPES and tensor.raw_data and len(tensor.raw_data) >= EXTERNAL_BYTES:
            moved.append((tensor.name, _DTYPES[tensor.data_type], list(tensor.dims), tensor.raw_data))
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            entry = tensor.external_data.add()
            entry.key, entry.value = "location", _LOCATION
    proto = model.SerializeToString()
    table, offset = [], 0
    for name, dtype, shape, data in moved:
        table.append([name, dtype, shape, offset])
        offset = _aligned(offset + len(data))
    encoded = json.dumps(table).encode()
    start = _aligned(_HEADER.size + len(proto) + len(encoded))
    out = bytearray(start + offset)
    _HEADER.pack_into(out, 0, MAGIC, len(proto), len(encoded))
    out[_HEADER.size : start] = (proto + encoded).ljust(start - _HEADER.size, b"\0")
    for (_, _, _, at), (_, _, _, data) in zip(table, moved):
        out[start + at : start + at + len(data)] = data
    return bytes(out)


def read_payload(processed) -> tuple[bytes, list[tuple[str, np.ndarray]]]:
    """(the ONNX model's bytes, [(initializer name, array over ``processed``)])."""
    view = memoryview(processed).cast("B")
    if bytes(view[:8]) != MAGIC:
        return bytes(view), []
    if len(view) < _HEADER.size:
        raise InvalidProgramError("OnnxRuntimeBackend: the delegate payload ends inside its header")
    _, model_size, table_size = _HEADER.unpack_from(view)
    table_at = _HEADER.size + model_size
    if table_at + table_size > len(view):
        raise InvalidProgramError("OnnxRuntimeBackend: the delegate payload is shorter than its header says")
    try:
        table = json.loads(bytes(view[table_at : table_at + table_size]))
        start = _aligned(table_at + table_size)
        arrays = []
        for name, dtype, shape, offset in table:
            count = int(np.prod(shape, dtype=np.int64))
            array = np.frombuffer(view, np.dtype(dtype), count, start + offset).reshape(shape)
            arrays.append((str(name), array))
    except (ValueError, TypeError) as e:  # a malformed table, an offset past the end
        raise InvalidProgramError(f"OnnxRuntimeBackend: the delegate payload's weight table is invalid: {e}") from None
    return bytes(view[_HEADER.size : table_at]), arrays
