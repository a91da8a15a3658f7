"""Progress of a long export on stderr: one line per stage with its time, a bar where there is a count.

Stage lines are always printed; the bar (tqdm's, when installed) only when ``quiet`` is off and
stderr is a terminal.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["Progress"]

try:
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

T = TypeVar("T")


class Progress:
    """``with progress.stage("to_edge"): ...`` prints ``[torchedge] to_edge`` and ``[torchedge] to_edge: 1.2 s``."""

    def __init__(self, quiet: bool = False, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.bars = not quiet and callable(isatty) and bool(isatty())

    def line(self, message: str) -> None:
        print(f"[torchedge] {message}", file=self.stream, flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.line(name)
        start = time.perf_counter()
        yield
        self.line(f"{name.split(' (')[0]}: {time.perf_counter() - start:.1f} s{_peak_memory()}")

    def bar(self, items: Iterable[T], total: int, description: str) -> Iterable[T]:
        """``items``, with a bar of ``total`` steps while they are consumed (when bars are on)."""
        if not self.bars:
            return items
        try:
            from tqdm import tqdm
        except ImportError:
            return items
        return tqdm(items, total=total, desc=description, file=self.stream, leave=False)


def _peak_memory() -> str:
    """The process's peak resident memory so far (``, peak 1.2 GB``), where the system reports it."""
    if resource is None:
        return ""
    kilobytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB; macOS: bytes
    gigabytes = kilobytes / (1 << 30 if sys.platform == "darwin" else 1 << 20)
    return f", peak {gigabytes:.1f} GB"
