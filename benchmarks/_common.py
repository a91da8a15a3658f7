"""Shared benchmark helpers: one thread everywhere, medians of repeated runs.

Timing itself lives in `torchedge.devtools.timing` (also behind `torchedge bench`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import multiprocessing
import os
import platform
import statistics
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

# Start every native library at one thread before any of them starts its pool; a benchmark that
# wants more asks for it (torch.set_num_threads, the torchedge runtime's num_threads).
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[var] = "1"

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)


def _keep_freed_memory() -> None:
    """Have glibc keep freed blocks of up to 32 MiB for reuse. Otherwise a block above its mmap
    threshold (128 KiB until the first such block is freed, then the size of that block) is
    fresh pages from the kernel on every allocation: eager PyTorch allocates its activations
    on every call, and whether they page-fault (4,000 faults per mobilenet_v2 call, 25% of its
    time) depended on what this process happened to allocate before. Fixed here, every side
    runs with its memory reused, eager at its best."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to set
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 64 << 20)


_keep_freed_memory()

from torchedge.devtools.timing import time_calls  # noqa: E402


def paired_ratio(a, b) -> float:
    """The median over rounds of ``a``'s time over ``b``'s in the same round (two `Timing`s from
    one `time_calls`): on a machine whose speed drifts from one minute to the next, each round's
    pair ran seconds apart, where separate medians may come from different phases."""
    return statistics.median(x / y for x, y in zip(a.samples, b.samples))


def median_seconds(fn, repeat: int, warmup: int = 1) -> float:
    return time_calls({"fn": fn}, repeat, warmup)["fn"].p50


def interleaved_seconds(fns: dict, rounds: int, batch_seconds: float = 0.005) -> dict:
    """Median seconds per call of each function, timed in alternating rounds of batches of calls
    (see `time_calls`)."""
    return {name: t.p50 for name, t in time_calls(fns, rounds, batch_seconds=batch_seconds).items()}


def _spin(stop) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


@contextlib.contextmanager
def background_load(processes: int):
    """Keep ``processes`` other processes busy (pure Python loops) while the block runs: the
    benchmark then measures a machine loaded by someone else."""
    if processes <= 0:
        yield
        return
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(processes)]
    for w in workers:
        w.start()
    try:
        yield
    finally:
        stop.set()
        for w in workers:
            w.join()


def print_table(headers: list[str], rows: list[list]) -> None:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def one_thread_everywhere() -> None:
    """torch and ExecuTorch's thread pool at one thread (torchedge's runtime uses one by default)."""
    import torch

    torch.set_num_threads(1)
    try:
        from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
    except ImportError:  # ExecuTorch is not installed: its columns are skipped
        return
    _unsafe_reset_threadpool(1)


def add_json_option(parser) -> None:
    """``--json PATH``: also write the results as JSON (tools/generate_performance_page.py reads them)."""
    parser.add_argument(
        "--json", type=Path, metavar="PATH", help="also write the results here as JSON (for the docs' performance page)"
    )


def machine() -> dict:
    """The CPU (its model name in /proc/cpuinfo), how many the process sees, the OS."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu": cpu, "cpus": os.cpu_count(), "system": platform.platform()}


def _versions() -> dict:
    found = {"python": platform.python_version()}
    for package in ("torchedge", "numpy", "torch", "executorch", "onnxruntime"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    return found


def _command() -> str:
    """This run's command line, less --json PATH."""
    args, skip = [], False
    for arg in sys.argv[1:]:
        if skip or arg.startswith("--json="):
            skip = False
            continue
        skip = arg == "--json"
        if not skip:
            args.append(arg)
    script = Path(sys.argv[0])
    return " ".join(["python", f"benchmarks/{script.name}", *args])


def write_json(path: Path | None, tables: dict[str, tuple[list[str], list[list]]]) -> None:
    """Write the named tables (headers, rows as printed), the command and the machine to ``path``."""
    if path is None:
        return
    result = {
        "benchmark": Path(sys.argv[0]).stem,
        "command": _command(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "versions": _versions(),
        "tables": [
            {"name": name, "columns": [str(h) for h in headers], "rows": [[str(c) for c in row] for row in rows]}
            for name, (headers, rows) in tables.items()
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


def report(headers: list[str], rows: list[list], json_path: Path | None = None) -> None:
    """Print the table, and with ``json_path`` also write it as JSON (see `write_json`)."""
    print_table(headers, rows)
    write_json(json_path, {"results": (headers, rows)})
