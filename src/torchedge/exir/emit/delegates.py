"""The program-wide table of delegate blobs, deduplicated by content, and the named data the
blobs refer to by key."""

from __future__ import annotations

import hashlib

from torchedge.errors import ExportError
from torchedge.schema.program import BackendDelegateInlineData

__all__ = ["DelegateTable"]


class DelegateTable:
    def __init__(self) -> None:
        self._blobs: list[bytes] = []
        self._index: dict[bytes, int] = {}
        self.named_data: dict[str, bytes] = {}

    def add(self, data: bytes, named_data: dict[str, bytes] | None = None) -> int:
        for key, value in (named_data or {}).items():
            if self.named_data.setdefault(key, value) != value:
                raise ExportError(f"two delegates store different data under the named key {key!r}")
        digest = hashlib.sha256(data).digest()
        if digest not in self._index:
            self._index[digest] = len(self._blobs)
            self._blobs.append(bytes(data))
        return self._index[digest]

    def inline_data(self) -> list[BackendDelegateInlineData]:
        return [BackendDelegateInlineData(data=b) for b in self._blobs]
