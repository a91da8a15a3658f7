"""Kernels whose checks can run once: ``prepare`` checks the arguments and returns the arithmetic."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["prepared"]


def prepared(prepare: Callable) -> Callable[[Callable], Callable]:
    """Gives a kernel its ``prepare``: a function of the kernel's arguments that makes every check
    the kernel makes and returns the arithmetic to call on them (or on any arguments of the same
    shapes and dtypes). The kernel itself is ``prepare(*args)(*args)``; load-time fusion, whose
    buffers are fixed at load, prepares each fused step once."""

    def attach(kernel: Callable) -> Callable:
        kernel.prepare = prepare  # type: ignore[attr-defined]
        return kernel

    return attach
