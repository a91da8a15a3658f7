"""`Runtime`: the entry point that loads programs."""

from __future__ import annotations

from typing import Callable

from torchedge.kernels.registry import Kernel, get_kernel
from torchedge.runtime.data_loader import loader_for
from torchedge.runtime.program import Program

__all__ = ["Runtime"]


def _kernel_lookup(kernels: str) -> Callable[[str], Kernel]:
    if kernels == "portable":
        return get_kernel
    if kernels == "aten":
        from torchedge.kernels.aten_mode import get_aten_kernel  # imports torch when a kernel is looked up

        return get_aten_kernel
    raise ValueError(f"unknown kernel set '{kernels}': use 'portable' (NumPy) or 'aten' (PyTorch's kernels)")


class Runtime:
    """Loads programs. One instance per kernel set:

    * ``Runtime.get()`` — the portable NumPy kernels (no torch);
    * ``Runtime.get(kernels="aten")`` — PyTorch's own kernels, the reference the
      portable ones are tested against (needs torch installed).
    """

    _instances: dict[str, "Runtime"] = {}

    def __init__(self, kernels: str = "portable"):
        self.kernels = kernels
        self._lookup = _kernel_lookup(kernels)

    @classmethod
    def get(cls, kernels: str = "portable") -> "Runtime":
        if kernels not in cls._instances:
            cls._instances[kernels] = cls(kernels)
        return cls._instances[kernels]

    def load_program(self, source, *, mmap: bool = True) -> Program:
        """Load a `.pte` from a path (memory-mapped unless ``mmap=False``), bytes, or a binary file."""
        return Program(loader_for(source, mmap_file=mmap), self._lookup)
