"""Freed memory back to the system during an export, so that each stage's peak is what it holds.

glibc's malloc serves blocks below its mmap threshold from heaps that it keeps after they are
freed, and raises that threshold (up to 32 MiB) whenever a larger mapped block is freed. After a
few weight-sized tensors come and go, later weight-sized blocks come from heaps that do not
shrink, and the process keeps every byte that an export stage once held. A fixed threshold makes
each block of `MAPPED_BLOCK` bytes or more a mapping of its own, unmapped when it is freed.
"""

from __future__ import annotations

import ctypes

__all__ = ["MAPPED_BLOCK", "map_large_blocks"]

MAPPED_BLOCK = 1 << 20  # bytes: blocks this large are mapped (and unmapped when freed)
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


def map_large_blocks() -> bool:
    """Set the mmap threshold of glibc's malloc to `MAPPED_BLOCK` for the rest of the process;
    False where the C library has no such setting (nothing changes there)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):  # no mallopt: macOS, Windows
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MAPPED_BLOCK))
