"""The delegate payload: an ONNX model whose large initializers are stored outside it, so that the
runtime hands ONNX Runtime arrays over the mapped .pte instead of having it parse and copy them
out of the protobuf.

Layout: a magic, the model's size and the table's size (little-endian uint64), the model (its
large initializers declared with external data, no bytes), then the table (JSON, one entry per
initializer). With ``MAGIC`` the entry is ``[name, dtype, shape, key]``: the bytes are the
program's named data under ``key``, their SHA-256 (`write_payload` returns them for
``PreprocessResult.data_store_output``), so a weight that several delegates or methods read is
stored once per program. With ``MAGIC_INLINE`` (read, not written) the entry is ``[name, dtype,
shape, offset]`` and the bytes follow the table, from the next multiple of `ALIGNMENT`. A
payload with neither magic is a plain ONNX model. NumPy only (the writer takes the ``onnx``
package's model).
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Callable

import numpy as np

from torchedge.errors import InvalidProgramError

__all__ = ["MAGIC", "MAGIC_INLINE", "ALIGNMENT", "EXTERNAL_BYTES", "write_payload", "read_payload", "payload_weights"]

MAGIC = b"TEORTX02"
MAGIC_INLINE = b"TEORTX01"
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
_WHERE = "OnnxRuntimeBackend: the delegate payload"


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def write_payload(model) -> tuple[bytes, dict[str, bytes]]:
    """(the payload, its large initializers' bytes by key) for ``model`` (an ``onnx.ModelProto``,
    changed in place: those initializers are declared external)."""
    from onnx import TensorProto

    table, named_data = [], {}
    for tensor in model.graph.initializer:
        if tensor.data_type in _DTYPES and tensor.raw_data and len(tensor.raw_data) >= EXTERNAL_BYTES:
            key = hashlib.sha256(tensor.raw_data).hexdigest()
            named_data[key] = tensor.raw_data
            table.append([tensor.name, _DTYPES[tensor.data_type], list(tensor.dims), key])
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            entry = tensor.external_data.add()
            entry.key, entry.value = "location", _LOCATION
    proto, encoded = model.SerializeToString(), json.dumps(table).encode()
    return _HEADER.pack(MAGIC, len(proto), len(encoded)) + proto + encoded, named_data


def _parse(processed) -> tuple[bytes, memoryview, list, int]:
    """(magic, the model's bytes, the weight table, where inline weights start) of a payload."""
    view = memoryview(processed).cast("B")
    magic = bytes(view[:8])
    if magic not in (MAGIC, MAGIC_INLINE):
        return b"", view, [], 0
    if len(view) < _HEADER.size:
        raise InvalidProgramError(f"{_WHERE} ends inside its header")
    _, model_size, table_size = _HEADER.unpack_from(view)
    table_at = _HEADER.size + model_size
    if table_at + table_size > len(view):
        raise InvalidProgramError(f"{_WHERE} is shorter than its header says")
    try:
        table = json.loads(bytes(view[table_at : table_at + table_size]))
        entries = [(str(name), np.dtype(dtype), tuple(int(n) for n in shape), at) for name, dtype, shape, at in table]
        if any(n < 0 for _, _, shape, _ in entries for n in shape):
            raise ValueError("a negative size")
        if any(dtype.name not in _DTYPES.values() for _, dtype, _, _ in entries):
            raise ValueError(f"dtypes must be among {sorted(set(_DTYPES.values()))}")
    except (ValueError, TypeError) as e:
        raise InvalidProgramError(f"{_WHERE}'s weight table is invalid: {e}") from None
    return magic, view[_HEADER.size : table_at], entries, _aligned(table_at + table_size)


def payload_weights(processed) -> tuple[bytes, list[tuple[str, int, str | None]]]:
    """(the ONNX model's bytes, [(initializer name, bytes, named data key or None if inline)])."""
    magic, model, table, _ = _parse(processed)
    weights = [(name, dtype.itemsize * math.prod(shape), at) for name, dtype, shape, at in table]
    return bytes(model), [(name, nbytes, at if magic == MAGIC else None) for name, nbytes, at in weights]


def read_payload(
    processed, named_data: Callable[[str], memoryview] | None = None
) -> tuple[bytes, list[tuple[str, np.ndarray]]]:
    """(the ONNX model's bytes, [(initializer name, read-only array)]): arrays over the bytes
    ``named_data(key)`` gives (the program's named data), or over ``processed`` for an inline
    payload; copied only where the bytes are not aligned for their dtype."""
    magic, model, table, start = _parse(processed)
    arrays = []
    for name, dtype, shape, at in table:
        count = math.prod(shape)
        if magic == MAGIC_INLINE:
            data, where = memoryview(processed).cast("B"), f"{_WHERE}'s inline weight '{name}'"
            offset = start + at if isinstance(at, int) else -1
        else:
            data, where, offset = _named(named_data, str(at), name), f"named data {at!r} (weight '{name}')", 0
        if not 0 <= offset <= len(data) - count * dtype.itemsize:
            raise InvalidProgramError(f"{where} needs {count * dtype.itemsize} bytes, more than are stored")
        array = np.frombuffer(data, dtype, count, offset).reshape(shape)
        if array.ctypes.data % dtype.itemsize:
            array = array.copy()
        array.flags.writeable = False
        arrays.append((name, array))
    return bytes(model), arrays


def _named(named_data: Callable[[str], memoryview] | None, key: str, name: str) -> memoryview:
    if named_data is None:
        raise InvalidProgramError(f"{_WHERE} keeps weight '{name}' in the program's named data, and none was given")
    try:
        return memoryview(named_data(key)).cast("B")
    except KeyError:
        raise InvalidProgramError(f"{_WHERE} names weight '{name}' by key {key!r}, which the program lacks") from None
