"""How many threads the runtime's kernels use.

The runtime owns its threads: a method runs with a fixed number of threads, one
unless the runtime or the method asks for more. `ThreadLimit` holds every native
pool that threadpoolctl controls (BLAS, OpenMP) at that size for the duration of
a run and restores the previous sizes after it; delegates receive the number
when they are loaded, as the `RUNTIME_NUM_THREADS` entry of their specs.
"""

from __future__ import annotations

from threadpoolctl import OpenBLASController, get_cached_controller

from torchedge.errors import InputError

__all__ = [
    "DEFAULT_NUM_THREADS",
    "RUNTIME_NUM_THREADS",
    "ThreadLimit",
    "check_num_threads",
    "decode_num_threads",
    "encode_num_threads",
]

DEFAULT_NUM_THREADS = 1
# Key of the runtime's thread count in the specs a backend's `init` receives, present only when
# the runtime or the method set it explicitly; it takes precedence over the delegate's compile specs.
RUNTIME_NUM_THREADS = "torchedge.runtime.num_threads"


def check_num_threads(num_threads) -> int:
    """``num_threads`` if it is a whole number >= 1, else an `InputError`."""
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise InputError(f"num_threads must be a whole number >= 1, got {num_threads!r}")
    return num_threads


def encode_num_threads(num_threads: int) -> bytes:
    return int(num_threads).to_bytes(4, "little")


def decode_num_threads(value: bytes) -> int:
    return int.from_bytes(value, "little")


class ThreadLimit:
    """Holds the native thread pools at ``num_threads`` while entered; restores them on exit.

    The pools are those loaded when the limit is made (threadpoolctl's cached
    controller, rebuilt when modules have been imported since). Entering asks each
    pool its size and changes only those of another size, so a run costs one query
    per pool, plus a set and a restore for each pool that was not already at the size.
    The pools are process-wide: concurrent runs in several Python threads share them.
    """

    __slots__ = ("num_threads", "_pools", "_changed")

    def __init__(self, num_threads: int = DEFAULT_NUM_THREADS):
        self.num_threads = check_num_threads(num_threads)
        self._pools = tuple(get_cached_controller().lib_controllers)
        self._changed: list = []

    def __enter__(self) -> ThreadLimit:
        changed = []
        for pool in self._pools:
            size = pool.get_num_threads()
            if size is not None and size != self.num_threads:
                pool.set_num_threads(self.num_threads)
                changed.append((pool, size))
        self._changed = changed
        return self

    def __exit__(self, *exc_info) -> None:
        if not self._changed:
            return
        for pool, size in self._changed:
            pool.set_num_threads(size)
        self._changed = []
        # OpenBLAS (pthreads) lets one Python thread at a time resize its pool: release it, so that
        # runs from other threads can limit it too.
        OpenBLASController.clear_controlling_thread()
