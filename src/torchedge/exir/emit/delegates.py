"""The program-wide table of delegate blobs, deduplicated by content."""

from __future__ import annotations

import hashlib

from torchedge.schema.program import BackendDelegateInlineData

__all__ = ["DelegateTable"]


class DelegateTable:
    def __init__(self) -> None:
        self._blobs: list[bytes] = []
        self._index: dict[bytes, int] = {}

    def add(self, data: bytes) -> int:
        digest = hashlib.sha256(data).digest()
        if digest not in self._index:
            self._index[digest] = len(self._blobs)
            self._blobs.append(bytes(data))
        return self._index[digest]

    def inline_data(self) -> list[BackendDelegateInlineData]:
        return [BackendDelegateInlineData(data=b) for b in self._blobs]
