"""Clamping float arrays by number bounds in one pass.

NumPy's clip ufunc with number bounds is one vectorised pass, and on the NumPy builds we use it
returns ``x`` itself where ``x`` ties with a bound (``clip(-0.0, 0.0, 6.0)`` is -0.0, as ATen's
clamp and relu give) and nan for nan. Whether this NumPy does so on this machine is checked
once, on float32 and float64 arrays long enough for its vector loops and short enough for its
scalar ones (`clip_keeps_ties`). Where it does not, the clamp runs as NumPy's minimum and
maximum against constant rows of one block's length (those ufuncs run several times slower
against a number than against a contiguous array), and the clamp and relu kernels send inputs
holding zeros down their general path, which restores the signs of zeros.
"""

from __future__ import annotations

import importlib
from functools import cache

import numpy as np

from torchedge.kernels.portable.elementwise import FAST_FLOATS

__all__ = ["BLOCK", "CLIP", "bound_row", "clamp_into", "clamp_by_numbers", "clip_keeps_ties"]

BLOCK = 1 << 14  # elements per block: a block and its bound rows stay in the L2 cache
_SMALL = 1 << 12  # below this many elements the checks cost more than the number-operand loop
# the clip ufunc itself (np.clip adds a Python layer); NumPy 1.x keeps it in numpy.core
CLIP = importlib.import_module("numpy._core.umath" if hasattr(np, "_core") else "numpy.core.umath").clip


@cache
def clip_keeps_ties(dtype: np.dtype) -> bool:
    """Whether `CLIP` by number bounds gives ``min(max(x, low), high)`` with each tie returning
    its first operand and nan staying nan, on arrays of ``dtype`` of several lengths and
    alignments (scalar and vector loops alike)."""
    if np.dtype(dtype) not in FAST_FLOATS:
        return False
    number = np.dtype(dtype).type
    values = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -1.0, 1.0, 2.0], dtype)
    for size in (1, 3, 8, 37, 1000):
        for shift in (0, 1):
            x = np.resize(np.roll(values, shift), size + 1)[1:]
            for low, high in ((0.0, 1.0), (-0.0, 1.0), (-1.0, 0.0), (-1.0, -0.0), (1.0, -1.0), (-np.inf, np.inf)):
                lo, hi = number(low), number(high)
                raised = np.where(np.isnan(x) | (x >= lo), x, lo)  # ties keep x, as ATen's max
                expected = np.where(np.isnan(raised) | (raised <= hi), raised, hi)
                with np.errstate(invalid="ignore"):
                    got = CLIP(x, lo, hi)
                if got.tobytes() != expected.tobytes():
                    return False
    return True


@cache
def _row(dtype: np.dtype, value_bytes: bytes) -> np.ndarray:
    row = np.full(BLOCK, np.frombuffer(value_bytes, dtype)[0], dtype)
    row.flags.writeable = False
    return row


def bound_row(value: float | np.floating, dtype) -> np.ndarray:
    """A read-only row of `BLOCK` copies of ``value`` in ``dtype`` (keyed by its bits, so -0.0
    and 0.0 get their own rows)."""
    dtype = np.dtype(dtype)
    return _row(dtype, dtype.type(value).tobytes())


def clamp_into(x: np.ndarray, low: float | None, high: float | None, out: np.ndarray) -> bool:
    """``min(max(x, low), high)`` into ``out`` (nan stays nan; a None bound is left out) by
    constant rows, block by block; False, with nothing written, unless ``x`` and ``out`` are
    C-contiguous arrays of one float dtype and size that are either one memory or apart, and
    large enough to gain. A zero tying with a zero bound may come out with either sign."""
    if x.size < _SMALL:
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
    lows = None if low is None else bound_row(low, dtype)
    highs = None if high is None else bound_row(high, dtype)
    for start in range(0, source.size, BLOCK):
        block = source[start : start + BLOCK]
        m = block.size
        into = target[start : start + m]
        if lows is not None:
            np.maximum(block, lows[:m], out=into)
            block = into
        if highs is not None:
            np.minimum(block, highs[:m], out=into)
    return True


def clamp_by_numbers(x: np.ndarray, low: float | None, high: float | None, out: np.ndarray) -> None:
    """``min(max(x, low), high)`` into ``out`` (of x's shape, at least one bound given, nan
    stays nan): one `CLIP` pass where it keeps ties (then zeros keep their signs), else block
    by block where `clamp_into` can, else one NumPy ufunc with the bounds as numbers of out's
    dtype (then a zero tying with a zero bound may come out with either sign)."""
    number = out.dtype.type
    if out.dtype == x.dtype and clip_keeps_ties(out.dtype):
        CLIP(x, number(-np.inf if low is None else low), number(np.inf if high is None else high), out=out)
        return
    if clamp_into(x, low, high, out):
        return
    if low is None:
        np.minimum(x, number(high), out=out)
    elif high is None:
        np.maximum(x, number(low), out=out)
    else:
        CLIP(x, number(low), number(high), out=out)


def _same_start(a: np.ndarray, b: np.ndarray) -> bool:
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
