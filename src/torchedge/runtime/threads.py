"""How many threads the runtime's kernels use.

The runtime owns its threads: a method runs with a fixed number of threads, one
unless the runtime or the method asks for more. `ThreadLimit` holds every native
pool that threadpoolctl controls (BLAS, OpenMP) at that size for the duration of
a run and restores the previous sizes after it; delegates receive the number
when they are loaded, as the `RUNTIME_NUM_THREADS` entry of their specs.

Runs in several Python threads at once share the process's pools (OpenBLAS's own threads,
MKL, BLIS), so those are held per pool and counted: the first run to enter sizes a pool, the
runs that overlap it keep that size, and the last one to leave restores the size it had
before. A pool is never resized while another run is inside it, and concurrent runs leave
it as they found it. OpenMP's limit belongs to the calling thread (so does OpenBLAS's when it
is built on OpenMP): each Python thread sizes and restores its own.
"""

from __future__ import annotations

import threading

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


def _per_thread(pool) -> bool:
    """Whether the pool's size is a setting of the calling thread (OpenMP's) rather than the process's."""
    return pool.user_api == "openmp" or (
        pool.internal_api == "openblas" and getattr(pool, "threading_layer", None) == "openmp"
    )


class _Holds:
    """The pools that runs hold now: per pool (and thread, for a per-thread pool), how many runs
    hold it and the size to restore when the last one leaves (None: it had the size)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str | tuple[str, int], list] = {}
        # threadpoolctl lets one Python thread at a time resize a pthreads OpenBLAS and silently ignores
        # the others: a run that resizes it takes that role (from whoever has it) until it restores it.
        self._openblas_owner: int | None = None

    def enter(self, pools: tuple, num_threads: int) -> None:
        thread = threading.get_ident()
        with self._lock:
            for pool, name, per_thread in pools:
                key = (name, thread) if per_thread else name
                hold = self._held.get(key)
                if hold is not None:
                    hold[0] += 1  # an overlapping run: the pool keeps the size the first one gave it
                    continue
                size = pool.get_num_threads()
                if size is not None and size != num_threads:
                    self._resize(pool, num_threads, thread)
                    self._held[key] = [1, size]
                else:
                    self._held[key] = [1, None]

    def exit(self, pools: tuple) -> None:
        thread = threading.get_ident()
        with self._lock:
            for pool, name, per_thread in pools:
                key = (name, thread) if per_thread else name
                hold = self._held[key]
                hold[0] -= 1
                if hold[0] == 0:
                    del self._held[key]
                    if hold[1] is not None:
                        self._resize(pool, hold[1], thread)
                        self._release(pool)

    def _resize(self, pool, size: int, thread: int) -> None:
        if isinstance(pool, OpenBLASController) and self._openblas_owner != thread:
            OpenBLASController.clear_controlling_thread(force=True)
            self._openblas_owner = thread
        pool.set_num_threads(size)

    def _release(self, pool) -> None:
        """Let code in any thread resize OpenBLAS again once it is restored."""
        if isinstance(pool, OpenBLASController):
            OpenBLASController.clear_controlling_thread()
            self._openblas_owner = None


_HOLDS = _Holds()


class ThreadLimit:
    """Holds the native thread pools at ``num_threads`` while entered; restores them on exit.

    The pools are those loaded when the limit is made (threadpoolctl's cached
    controller, rebuilt when modules have been imported since). The first run to enter
    asks each pool its size and changes only those of another size, so a run costs one
    query per pool, plus a set and a restore for each pool that was not already at the size.
    A limit keeps no state of its own: runs in several threads may enter it (or others) at
    once, as the module's docstring describes.
    """

    __slots__ = ("num_threads", "_pools")

    def __init__(self, num_threads: int = DEFAULT_NUM_THREADS):
        self.num_threads = check_num_threads(num_threads)
        pools = get_cached_controller().lib_controllers
        self._pools = tuple((pool, pool.filepath, _per_thread(pool)) for pool in pools)

    def __enter__(self) -> ThreadLimit:
        if self._pools:
            _HOLDS.enter(self._pools, self.num_threads)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._pools:
            _HOLDS.exit(self._pools)
