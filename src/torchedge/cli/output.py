"""What the commands print: progress lines on stderr, array summaries, latencies, thread counts."""

from __future__ import annotations

import sys

import numpy as np

from torchedge.devtools.timing import Timing

__all__ = ["stage", "summary", "describe", "latency", "threads_text"]


def stage(message: str) -> None:
    print(f"[torchedge] {message}", file=sys.stderr, flush=True)


def summary(array) -> str:
    if not isinstance(array, np.ndarray):
        return repr(array)
    flat = array.reshape(-1)[:6]
    return f"{array.dtype} {list(array.shape)} first values {np.array2string(flat, precision=4)}"


def describe(value) -> str:
    return f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__


def latency(timing: Timing) -> str:
    ms = timing.milliseconds()
    return f"p50 {ms['p50']:.3f} ms, p90 {ms['p90']:.3f} ms, min {ms['min']:.3f} ms"


def threads_text(num_threads: int) -> str:
    return f"{num_threads} thread{'s' if num_threads > 1 else ''}"
