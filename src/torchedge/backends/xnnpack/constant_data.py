"""Reading an XNNPACK payload's constants: from the program's named data (by key), or from the
constant data after the payload's flatbuffer (by offset, older payloads); 4-bit values unpacked."""

from __future__ import annotations

import numpy as np

from torchedge.backends.xnnpack import schema as s
from torchedge.errors import InvalidProgramError

__all__ = ["constant_reader"]

_NO_CONSTANT = (1 << 64) - 1  # ConstantDataOffset.offset when the data is in the named data map


def constant_reader(graph: s.XNNGraph, constant_data: memoryview, named_data):
    """``read(value_id, tensor)``: the constant's bytes as a read-only array of the tensor's shape;
    ``read.scales(index, count)``: ``count`` float32 scales from constant ``index``."""

    def read(value_id: int, tensor) -> np.ndarray:
        where = f"XNNPACK value {value_id}: constant {tensor.value.constant_buffer_idx}"
        quant = tensor.quant
        if quant is None or not quant.packed:
            return array(tensor.value.constant_buffer_idx, tensor.dims, tensor.dtype, where)
        if len(tensor.dims) != 2:
            raise InvalidProgramError(f"{where}: 4-bit values must be 2-D, not {list(tensor.dims)}")
        rows, columns = tensor.dims
        raw = array(tensor.value.constant_buffer_idx, (rows, (columns + 1) // 2), np.dtype(np.uint8), where)
        values = quant.unpack(raw, columns)
        values.flags.writeable = False
        return values

    def scales(index: int, count: int, dtype: np.dtype | None = None) -> np.ndarray:
        dtype = np.dtype(np.float32) if dtype is None else dtype
        return array(index, (count,), dtype, f"XNNPACK scales: constant {index}")

    def array(index: int, dims: tuple[int, ...], dtype: np.dtype, where: str) -> np.ndarray:
        if index >= len(graph.constant_data):
            raise InvalidProgramError(f"{where} is past the {len(graph.constant_data)} entries of constant_data")
        entry = graph.constant_data[index]
        if entry.named_key:
            data = named_data.get(entry.named_key)
        elif entry.offset != _NO_CONSTANT and entry.offset + entry.size <= len(constant_data):
            data = constant_data[entry.offset : entry.offset + entry.size]
        else:
            raise InvalidProgramError(
                f"{where} at offset {entry.offset} (+{entry.size}) is outside the payload's "
                f"{len(constant_data)} bytes of constant data"
            )
        if data is None:
            raise InvalidProgramError(f"{where}: the named data has no entry {entry.named_key!r}")
        nbytes = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
        if len(data) < nbytes:
            raise InvalidProgramError(f"{where} has {len(data)} bytes, its shape {list(dims)} needs {nbytes}")
        result = np.frombuffer(data, dtype=dtype, count=nbytes // dtype.itemsize).reshape(dims)
        if result.ctypes.data % dtype.itemsize:
            result = result.copy()
        result.flags.writeable = False
        return result

    read.scales = scales
    return read
