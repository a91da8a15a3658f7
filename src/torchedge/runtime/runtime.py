"""`Runtime`: the entry point that loads programs."""

from __future__ import annotations

from torchedge.runtime.data_loader import loader_for
from torchedge.runtime.program import Program

__all__ = ["Runtime"]


class Runtime:
    _instance: "Runtime | None" = None

    @classmethod
    def get(cls) -> "Runtime":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def load_program(self, source, *, mmap: bool = True) -> Program:
        """Load a `.pte` from a path (memory-mapped unless ``mmap=False``), bytes, or a binary file."""
        return Program(loader_for(source, mmap_file=mmap))
