"""Run the op_db sweep in worker processes, with a time limit per case and bounded memory.

Each of ``jobs`` threads owns one `op_db_worker` process and feeds it units (an OpInfo at
one dtype). A case that overruns its limit inside Python ends as ``timeout`` in the worker;
one stuck in native code is ended by killing the worker, which is then restarted for the
unit's remaining samples. A worker is also restarted when its peak memory passes
``max_rss_mb`` or after ``units_per_worker`` units, so that leaks cannot accumulate.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from tools.qa.op_db_sweep import CaseResult, family_of, find_entry

__all__ = ["run_sweep"]

# The repository root: workers run ``python -m tools.qa.op_db_worker`` from it, whatever the caller's cwd.
ROOT = Path(__file__).resolve().parents[2]


class _Worker:
    """One worker process and a thread that reads its result lines into a queue."""

    def __init__(self) -> None:
        inherited = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        path = os.pathsep.join([str(ROOT), *inherited])  # the caller's relative entries, from its cwd
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tools.qa.op_db_worker"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": path},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        self.units = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)  # end of stream: the worker exited

    def send(self, request: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        self.units += 1

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _lost(name: str, dtype: str, sample: int, outcome: str, message: str) -> CaseResult:
    return CaseResult(name, family_of(find_entry(name).name), dtype, sample, outcome, message=message)


class _Runner:
    def __init__(self, timeout: float, max_rss_mb: int, units_per_worker: int, report) -> None:
        self.timeout = timeout
        self.max_rss_mb, self.units_per_worker = max_rss_mb, units_per_worker
        self.report = report
        self.lock = threading.Lock()
        self.results: list[CaseResult] = []

    def _emit(self, result: CaseResult) -> None:
        with self.lock:
            self.results.append(result)
            if self.report:
                self.report(result)

    def _unit(self, worker: _Worker, name: str, dtype: str, start: int, stop: int) -> _Worker:
        """Run samples ``start..stop-1`` of one unit; returns the worker to use next (a fresh
        one after a kill or crash)."""
        while start < stop:
            request = {"op": name, "dtype": dtype, "start": start, "stop": stop, "timeout": self.timeout}
            worker.send(request)
            while True:
                try:  # the first line also waits for sample generation, under its own limit
                    line = worker.lines.get(timeout=2 * self.timeout + 30)
                except queue.Empty:
                    self._emit(_lost(name, dtype, start, "timeout", f"killed after {2 * self.timeout + 30:g} s"))
                    worker.close()
                    worker, start = _Worker(), start + 1
                    break
                if line is None:
                    self._emit(_lost(name, dtype, start, "crash", f"worker exited ({worker.process.wait()})"))
                    worker.close()
                    worker, start = _Worker(), start + 1
                    break
                message = json.loads(line)
                if message.get("done"):
                    if message["maxrss_mb"] > self.max_rss_mb or worker.units >= self.units_per_worker:
                        worker.close()
                        worker = _Worker()
                    return worker
                result = CaseResult(**message)
                self._emit(result)
                start = result.sample + 1
        return worker

    def loop(self, todo: queue.Queue) -> None:
        worker = _Worker()
        try:
            while True:
                try:
                    name, dtype, start, stop = todo.get_nowait()
                except queue.Empty:
                    return
                worker = self._unit(worker, name, dtype, start, stop)
        finally:
            worker.close()


def run_sweep(
    units: list[tuple[str, str]],
    samples: int = 3,
    jobs: int = 2,
    timeout: float = 60.0,
    max_rss_mb: int = 4096,
    units_per_worker: int = 200,
    report: Callable[[CaseResult], None] | None = None,
    done: frozenset[tuple[str, str, int]] = frozenset(),
) -> list[CaseResult]:
    """The results of the first ``samples`` samples of every (OpInfo, dtype) unit, run by
    ``jobs`` worker processes, leaving out the (OpInfo, dtype, sample) cases in ``done``;
    ``report`` is called with each result as it arrives. The first
    sample of every unit runs first, so that a sweep cut short still covers every unit."""
    todo: queue.Queue = queue.Queue()
    for name, dtype in units:
        if (name, dtype, 0) not in done:
            todo.put((name, dtype, 0, 1))
    for name, dtype in units:
        start = 1
        while (name, dtype, start) in done:
            start += 1
        if start < samples:
            todo.put((name, dtype, start, samples))
    runner = _Runner(timeout, max_rss_mb, units_per_worker, report)
    threads = [threading.Thread(target=runner.loop, args=(todo,)) for _ in range(max(1, jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    order = {unit: i for i, unit in enumerate(units)}
    return sorted(runner.results, key=lambda r: (order[(r.op, r.dtype)], r.sample))
