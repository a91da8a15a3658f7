"""Clamping float arrays by number bounds in one pass.

NumPy's clip ufunc with number bounds is one vectorised pass, and on the NumPy builds we use it
returns ``x`` itself where ``x`` ties with a bound (``clip(-0.0, 0.0, 6.0)`` is -0.0, as ATen's
clamp and relu give) and nan for nan. Whether this NumPy does so on this machine is checked
once, on float32 and float64 arrays long enough for its vector loops and short enough for its
scalar ones (`clip_keeps_ties`). Where it does not, the clamp runs as NumPy's minimum and
maximum against the bounds as numbers, and the clamp and relu kernels send inputs holding
zeros down their general path, which restores the signs of zeros.
"""

from __future__ import annotations

import importlib
from functools import cache

import numpy as np

from torchedge.kernels.portable.elementwise import FAST_FLOATS

__all__ = ["CLIP", "clamp_by_numbers", "clip_keeps_ties"]

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


def clamp_by_numbers(x: np.ndarray, low: float | None, high: float | None, out: np.ndarray) -> None:
    """``min(max(x, low), high)`` into ``out`` (of x's shape, at least one bound given, nan
    stays nan): one `CLIP` pass where it keeps ties (then zeros keep their signs), else one
    NumPy ufunc with the bounds as numbers of out's dtype (then a zero tying with a zero bound
    may come out with either sign)."""
    number = out.dtype.type
    if out.dtype == x.dtype and clip_keeps_ties(out.dtype):
        CLIP(x, number(-np.inf if low is None else low), number(np.inf if high is None else high), out=out)
    elif low is None:
        np.minimum(x, number(high), out=out)
    elif high is None:
        np.maximum(x, number(low), out=out)
    else:
        CLIP(x, number(low), number(high), out=out)
