"""The debug buffer: the bytes of the tensors an ETDump logs, which its `Tensor` entries point into.

Each tensor's data is stored contiguous (row-major) at an offset aligned to 64 bytes; the
dump's entry holds its dtype, sizes, strides (in elements) and that offset. ExecuTorch's
Inspector reads ``buffer[offset : offset + nbytes]``, so any aligned layout it can address works.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.errors import InvalidProgramError
from torchedge.schema import etdump as ed
from torchedge.schema.scalar_type import numpy_dtype, scalar_type_of

__all__ = ["DebugBufferWriter", "read_tensor", "tensor_entry"]

_ALIGNMENT = 64


class DebugBufferWriter:
    """Appends tensors' bytes into a buffer of at most ``capacity`` bytes."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._chunks: list[bytes] = []
        self._size = 0

    def append(self, array: np.ndarray) -> int | None:
        """The offset ``array``'s bytes were stored at, or None when they no longer fit."""
        offset = -self._size % _ALIGNMENT + self._size
        data = np.ascontiguousarray(array).tobytes()
        if offset + len(data) > self.capacity:
            return None
        self._chunks.append(bytes(offset - self._size))
        self._chunks.append(data)
        self._size = offset + len(data)
        return offset

    @property
    def data(self) -> bytes:
        return b"".join(self._chunks)


def tensor_entry(array: np.ndarray, offset: int) -> ed.Tensor:
    """The dump's description of ``array`` stored contiguous at ``offset``."""
    sizes = [int(s) for s in array.shape]
    strides = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
    return ed.Tensor(scalar_type=scalar_type_of(array.dtype), sizes=sizes, strides=strides, offset=offset)


def read_tensor(buffer: bytes | memoryview, tensor: ed.Tensor) -> np.ndarray:
    """The array an entry describes (a copy), checked against the buffer's size."""
    dtype = numpy_dtype(tensor.scalar_type)
    sizes = [int(s) for s in tensor.sizes]
    if any(s < 0 for s in sizes):
        raise InvalidProgramError(f"debug buffer: a logged tensor has negative sizes {sizes}")
    nbytes = math.prod(sizes) * dtype.itemsize
    if tensor.offset < 0 or tensor.offset + nbytes > len(buffer):
        raise InvalidProgramError(
            f"debug buffer: a logged tensor of {nbytes} bytes at offset {tensor.offset} lies outside "
            f"the buffer's {len(buffer)} bytes"
        )
    return np.frombuffer(buffer, dtype, math.prod(sizes), tensor.offset).reshape(sizes).copy()
