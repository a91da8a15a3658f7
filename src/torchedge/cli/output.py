"""What the commands print and write: progress lines on stderr, array summaries, latencies, thread
counts, and outputs saved as an .npz."""

from __future__ import annotations

import sys

import numpy as np

from torchedge.devtools.timing import Timing

__all__ = ["stage", "summary", "describe", "latency", "threads_text", "save_outputs", "portable_array"]


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


def portable_array(value) -> np.ndarray:
    """``value`` as an array np.load reads back without ml_dtypes: bfloat16 and the other ml_dtypes
    floats (which NumPy stores as raw bytes) widened to float32, exactly."""
    array = np.asarray(value)
    return array.astype(np.float32) if array.dtype.kind == "V" else array  # ml_dtypes' kind


def save_outputs(path: str, outputs: list) -> str:
    """Write ``outputs`` to ``path`` with np.savez as output_0, output_1, ... (a None output is left
    out); what was written, for the user."""
    arrays = {f"output_{i}": portable_array(out) for i, out in enumerate(outputs) if out is not None}
    skipped = len(outputs) - len(arrays)
    np.savez(path, **arrays)  # type: ignore[arg-type]
    written = path if path.endswith(".npz") else f"{path}.npz"  # np.savez adds the suffix
    note = f", {skipped} None output(s) left out" if skipped else ""
    return f"{written} ({len(arrays)} output(s): {', '.join(arrays) or 'none'}{note})"
