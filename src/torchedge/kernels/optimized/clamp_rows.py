"""Clamping float arrays by number bounds against constant rows, block by block.

Where NumPy's clip does not keep ties (`bounds.clip_keeps_ties`), the portable clamp runs
NumPy's minimum and maximum with the bounds as numbers; those ufuncs run several times slower
against a number than against a contiguous array. Here arrays of at least
`clamp_rows_min_elements` compare block by block (`clamp_rows_block` elements) against
read-only rows holding the bound. The values are the portable ones (each element meets the
same bounds; a zero tying with a zero bound may take either sign on both paths). The thresholds
are in `tuning`.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable import bounds

__all__ = ["bound_row", "clamp_into", "clamp_by_numbers"]


@cache
def _row(dtype: np.dtype, value_bytes: bytes, length: int) -> np.ndarray:
    row = np.full(length, np.frombuffer(value_bytes, dtype)[0], dtype)
    row.flags.writeable = False
    return row


def bound_row(value: float | np.floating, dtype) -> np.ndarray:
    """A read-only row of `clamp_rows_block` copies of ``value`` in ``dtype`` (keyed by its
    bits, so -0.0 and 0.0 get their own rows)."""
    dtype = np.dtype(dtype)
    return _row(dtype, dtype.type(value).tobytes(), _block())


def clamp_into(x: np.ndarray, low: float | None, high: float | None, out: np.ndarray) -> bool:
    """``min(max(x, low), high)`` into ``out`` (nan stays nan; a None bound is left out) by
    constant rows, block by block; False, with nothing written, unless ``x`` and ``out`` are
    C-contiguous arrays of one float dtype and size that are either one memory or apart, of at
    least `clamp_rows_min_elements`. A zero tying with a zero bound may come out with either sign."""
    if x.size < tuned("clamp_rows_min_elements"):
        return False
    dtype = x.dtype
    if not (
        out.dtype == dtype
        and dtype.kind == "f"
        and x.size == out.size
        and x.flags.c_contiguous
        and out.flags.c_contiguous
        and (x is out or not np.may_share_memory(x, out) or _same_start(x, out))
    ):
        return False
    source, target = x.reshape(-1), out.reshape(-1)
    block = _block()
    lows = None if low is None else bound_row(low, dtype)
    highs = None if high is None else bound_row(high, dtype)
    for start in range(0, source.size, block):
        chunk = source[start : start + block]
        m = chunk.size
        into = target[start : start + m]
        if lows is not None:
            np.maximum(chunk, lows[:m], out=into)
            chunk = into
        if highs is not None:
            np.minimum(chunk, highs[:m], out=into)
    return True


def clamp_by_numbers(x: np.ndarray, low: float | None, high: float | None, out: np.ndarray) -> None:
    """`bounds.clamp_by_numbers`, against constant rows where NumPy's clip does not keep ties
    and `clamp_into` can."""
    if (out.dtype == x.dtype and bounds.clip_keeps_ties(out.dtype)) or not clamp_into(x, low, high, out):
        bounds.clamp_by_numbers(x, low, high, out)


def _block() -> int:
    return max(1, int(tuned("clamp_rows_block")))


def _same_start(a: np.ndarray, b: np.ndarray) -> bool:
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
