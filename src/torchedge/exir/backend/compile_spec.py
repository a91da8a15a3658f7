"""`CompileSpec`: an opaque key/bytes option that travels with a delegate to its backend."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CompileSpec"]


@dataclass(frozen=True)
class CompileSpec:
    key: str
    value: bytes
