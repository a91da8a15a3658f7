"""The program-wide tables of constant tensor bytes: inside the program (deduplicated by
content) or outside it, by name, for a `.ptd` file."""

from __future__ import annotations

import hashlib

import torch

from torchedge.errors import ExportError
from torchedge.schema.program import Buffer

__all__ = ["ConstantTable", "ExternalConstants", "tensor_bytes", "tensor_view"]


def tensor_view(t: torch.Tensor) -> memoryview:
    """The tensor's elements in contiguous (row-major) order, as a read-only byte view of the
    tensor's own memory (of a contiguous copy when the tensor is not contiguous)."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()).toreadonly() if flat.numel() else memoryview(b"")


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The tensor's elements in contiguous (row-major) order, as raw bytes (a copy)."""
    return bytes(tensor_view(t))


class ConstantTable:
    """Index 0 is reserved (``data_buffer_idx == 0`` means "not a constant"). Entries are kept
    as given: a `tensor_view` stays a view of its tensor."""

    def __init__(self) -> None:
        self._buffers: list[bytes | memoryview] = [b""]
        self._index: dict[bytes, int] = {}
        self._viewed: dict[int, tuple[torch.Tensor, int]] = {}  # id -> (tensor, its version when viewed)

    def view(self, t: torch.Tensor) -> memoryview:
        """`tensor_view` of ``t``, remembered so that `check_unchanged` sees an in-place change."""
        self._viewed[id(t)] = (t, t._version)
        return tensor_view(t)

    def check_unchanged(self) -> None:
        """Raise where a tensor the entries view (`view`) was changed in place since: the program
        would be written with values it was not compiled with."""
        for t, version in self._viewed.values():
            if t._version != version:
                raise ExportError(
                    f"a constant of the program (a tensor of sizes {list(t.shape)}, {t.dtype}) changed in place "
                    "after to_executorch, which writes the .pte from the tensors' own memory: read "
                    "`.buffer` (or save) before changing the model's weights, or call to_executorch again"
                )

    def add(self, data: bytes | memoryview) -> int:
        digest = hashlib.sha256(data).digest()
        index = self._index.get(digest)
        if index is None:
            index = len(self._buffers)
            self._buffers.append(data)
            self._index[digest] = index
        return index

    def buffers(self) -> list[Buffer]:
        return [Buffer(storage=b) for b in self._buffers]

    @property
    def nbytes(self) -> int:
        return sum(len(b) for b in self._buffers)


class ExternalConstants:
    """Constants kept out of the program, by fully qualified name (ExecuTorch's external
    constants): each name's bytes and tensor layout, for a `.ptd` file."""

    def __init__(self) -> None:
        self.data: dict[str, bytes | memoryview] = {}
        self.layouts: dict[str, tuple] = {}  # name -> (ScalarType, sizes, dim_order)

    def add(self, name: str, data: bytes | memoryview, layout: tuple) -> None:
        if self.data.setdefault(name, data) != data:
            raise ExportError(f"two methods hold different values under the constant name '{name}'")
        self.layouts[name] = layout
