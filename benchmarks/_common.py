"""Shared benchmark helpers: one thread everywhere, medians of repeated runs."""

from __future__ import annotations

import os

# Pin every library to one thread before any of them starts its pool.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[var] = "1"

import statistics  # noqa: E402
import time  # noqa: E402


def median_seconds(fn, repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_seconds(fns: dict, rounds: int, batch_seconds: float = 0.005) -> dict:
    """Median seconds per call of each function, timed in alternating rounds.

    Each round times every function once, so drift in machine speed (other
    processes, frequency changes) hits all sides alike. A function that takes
    microseconds is called in batches of about ``batch_seconds`` so that timer
    resolution and per-sample noise do not dominate.
    """
    batches = {}
    for name, fn in fns.items():
        fn()  # warm up
        start = time.perf_counter()
        fn()
        batches[name] = max(1, int(batch_seconds / max(time.perf_counter() - start, 1e-7)))
    samples = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            n = batches[name]
            start = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - start) / n)
    return {name: statistics.median(times) for name, times in samples.items()}


def print_table(headers: list[str], rows: list[list]) -> None:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
