"""Timing calls: warm-up, samples taken in alternating rounds, p50/p90/min; and the process's
memory (`current_rss`, and `PeakRss` while they run).

One place for `torchedge bench`, `run`, `check` and the scripts in `benchmarks/`.
NumPy only.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from torchedge.errors import InputError

__all__ = ["Timing", "time_calls", "PeakRss", "current_rss"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call of one function, one sample per round."""

    samples: tuple[float, ...]

    @property
    def p50(self) -> float:
        return float(np.percentile(self.samples, 50))

    @property
    def p90(self) -> float:
        return float(np.percentile(self.samples, 90))

    @property
    def min(self) -> float:
        return min(self.samples)

    def milliseconds(self) -> dict[str, float]:
        return {"p50": self.p50 * 1e3, "p90": self.p90 * 1e3, "min": self.min * 1e3}


def time_calls(
    fns: Mapping[str, Callable[[], object]], repeat: int, warmup: int = 1, batch_seconds: float = 0.0
) -> dict[str, Timing]:
    """Call each function ``warmup`` times, then time it in ``repeat`` rounds.

    Each round times every function once, so drift in machine speed (other
    processes, frequency changes) hits all of them alike, starting one function
    later than the round before: each function follows each other one equally
    often (a function timed right after a large one finds the caches cold, and a
    fixed order would charge that to one function only). A sample is one call,
    or with ``batch_seconds`` > 0 the mean of as many calls as take about that
    long (for functions of microseconds, where timer resolution and per-call
    noise would dominate).
    """
    if repeat < 1:
        raise InputError(f"repeat must be at least 1, got {repeat}")
    if warmup < 0:
        raise InputError(f"warmup must be at least 0, got {warmup}")
    if not fns:
        return {}
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    batches = {name: _batch_size(fn, batch_seconds) for name, fn in fns.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    for round_index in range(repeat):
        shift = round_index % len(order)
        for name, fn in order[shift:] + order[:shift]:
            n = batches[name]
            start = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - start) / n)
    return {name: Timing(tuple(times)) for name, times in samples.items()}


def _batch_size(fn: Callable[[], object], batch_seconds: float) -> int:
    """How many calls of ``fn`` take about ``batch_seconds`` (one when not batching)."""
    if batch_seconds <= 0:
        return 1
    start = time.perf_counter()
    fn()
    return max(1, int(batch_seconds / max(time.perf_counter() - start, 1e-7)))


class PeakRss:
    """The process's resident memory (RSS) over a ``with`` block, in bytes: what the runtime,
    NumPy and native libraries (ONNX Runtime, BLAS) hold, counted by the operating system.

    ``peak`` is the highest RSS during the block (``scope == "block"``) where the kernel's
    high-water mark can be reset (Linux, which resets it for the whole process); elsewhere it is
    the highest RSS since the process started (``scope == "process"``). ``before`` is the RSS at
    the start (None where it cannot be read). Both are None where neither can be read.
    """

    def __init__(self) -> None:
        self.before: int | None = None
        self.peak: int | None = None
        self.scope = "process"

    def __enter__(self) -> PeakRss:
        if _reset_high_water_mark():
            self.scope = "block"
        self.before = current_rss()
        return self

    def __exit__(self, *exc) -> None:
        self.peak = _proc_status_bytes("VmHWM") or _max_rss()
        if self.peak is not None and self.before is not None:
            self.peak = max(self.peak, self.before)


def current_rss() -> int | None:
    """The process's resident memory now, in bytes (None where it cannot be read: not Linux)."""
    return _proc_status_bytes("VmRSS")


def _reset_high_water_mark() -> bool:
    """Reset the process's peak RSS to its current RSS (Linux 4.0 and later)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _proc_status_bytes(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (Linux), in bytes."""
    try:
        with open("/proc/self/status") as f:
            match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
    except OSError:
        return None
    return int(match[1]) * 1024 if match else None


def _max_rss() -> int | None:
    """The process's peak RSS since it started, from ``getrusage`` (none on Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere
