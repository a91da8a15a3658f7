"""Data loaders: where a program's bytes come from.

Each loader exposes ``data``, a buffer (bytes-like) holding the whole file.
Constants are zero-copy NumPy views onto it, so the loader must outlive the
methods loaded from it (the `Program` keeps a reference).
"""

from __future__ import annotations

import mmap
import os
from typing import BinaryIO

import numpy as np

from torchedge.errors import InvalidProgramError

__all__ = ["DataLoader", "BufferDataLoader", "FileDataLoader", "MmapDataLoader", "loader_for"]

# Constants need alignment for their dtype; NumPy's own allocations give at least this.
_ALIGNMENT = 16


class DataLoader:
    data: memoryview

    def __len__(self) -> int:
        return len(self.data)


class BufferDataLoader(DataLoader):
    """Bytes already in memory. Copied once only if the buffer is misaligned."""

    def __init__(self, data) -> None:
        array = np.frombuffer(data, dtype=np.uint8)
        if array.ctypes.data % _ALIGNMENT:
            aligned = np.empty(len(array), dtype=np.uint8)
            aligned[:] = array
            array = aligned
        self.data = array.data


class FileDataLoader(BufferDataLoader):
    """Reads the whole file into memory."""

    def __init__(self, path: str | os.PathLike) -> None:
        with open(path, "rb") as f:
            data = np.fromfile(f, dtype=np.uint8)
        super().__init__(data)
        self.path = os.fspath(path)


class MmapDataLoader(DataLoader):
    """Maps the file read-only: constants are paged in on first use."""

    def __init__(self, path: str | os.PathLike) -> None:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise InvalidProgramError(f"'{os.fspath(path)}' is empty, not a .pte program")
            self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.data = memoryview(self._mmap)
        self.path = os.fspath(path)


def loader_for(source, mmap_file: bool = True, what: str = ".pte file") -> DataLoader:
    """A loader for a path, bytes-like object, readable binary file, or an existing loader
    (``what``: the kind of file, for the error when the path names none)."""
    if isinstance(source, DataLoader):
        return source
    if isinstance(source, (str, os.PathLike)):
        if not os.path.isfile(source):
            kind = "a directory, not a" if os.path.isdir(source) else "no such"
            raise FileNotFoundError(f"{kind} {what}: '{os.fspath(source)}'")
        return MmapDataLoader(source) if mmap_file else FileDataLoader(source)
    if isinstance(source, (bytes, bytearray, memoryview, np.ndarray)):
        return BufferDataLoader(source)
    if hasattr(source, "read"):
        return BufferDataLoader(_read_all(source))
    raise TypeError(f"cannot load a program from {type(source).__name__}: pass a path, bytes, or a binary file object")


def _read_all(f: BinaryIO) -> bytes:
    data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("the file object must be opened in binary mode")
    return data
