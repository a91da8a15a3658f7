"""The complementary error function family: ``erfc``, ``special_erfcx`` and ``special_ndtri``.

Everything is computed in float64 and rounded once into the result dtype.

* ``erfcx(x) = exp(x²) erfc(x)`` on [0, 12] is a piecewise polynomial: on each interval of
  width 1/4 the Chebyshev interpolant of Python's ``math.erfc(x) * exp(x²)`` (``x²`` split
  exactly into two doubles, so the seed values are good to an ulp or two), computed once
  when first needed. Beyond 12 its asymptotic series in ``1/(2x²)`` converges to an ulp in
  ten terms; for x < 0, ``erfcx(x) = 2 exp(x²) - erfcx(-x)``.
* ``erfc(x) = exp(-x²) erfcx(x)`` for x >= 0 (``2 - erfc(-x)`` below), ``exp(-x²)`` formed
  from an exact split of ``x²`` so that it keeps its relative accuracy until it underflows.
* ``ndtri(p)``, the inverse of the normal distribution function ``Φ``, starts from the
  rational guess of Abramowitz and Stegun 26.2.23 (error below 4.5e-4) and takes two
  Halley steps on ``log Φ(x) = log p`` in the lower tail (``ndtri(p) = -ndtri(1 - p)`` above 1/2,
  where ``1 - p`` is exact), with ``log Φ`` written through ``erfcx`` so nothing underflows.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from functools import cache

import numpy as np

from torchedge.kernels.dtypes import float_result_type
from torchedge.kernels.portable.common import fail, write
from torchedge.kernels.portable.elementwise import FLOAT
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.portable.unary import unary_kernel
from torchedge.kernels.registry import register_kernel

__all__ = ["PiecewiseChebyshev", "erfc", "erfcx", "ndtri", "exp_minus_square", "float64_unary"]

HALVES = frozenset({"float16", "bfloat16"})  # dtype names: bfloat16 exists once ml_dtypes is imported


class PiecewiseChebyshev:
    """Piecewise polynomial interpolant of ``f`` (a Python float function) on [lo, hi]: on
    each interval of ``width`` the Chebyshev interpolant at ``nodes`` first-kind nodes,
    truncated where its coefficients fall below ``tol`` relative to the first, evaluated in
    float64 by Horner's rule on coefficients gathered per element (inputs outside [lo, hi]
    are clipped to it: the caller picks the values it uses)."""

    def __init__(self, f, lo: float, hi: float, width: float, tol: float = 1e-17, nodes: int = 24):
        self.lo, self.hi, self.width = lo, hi, width
        count = round((hi - lo) / width)
        pieces = [self._coefficients(f, lo + i * width, lo + (i + 1) * width, nodes) for i in range(count)]
        degree = max(int(np.nonzero(np.abs(c) >= tol * abs(c[0]))[0][-1]) + 1 for c in pieces)
        self.tables = [np.ascontiguousarray([c[k] for c in pieces]) for k in range(degree)]

    @staticmethod
    def _coefficients(f, lo: float, hi: float, n: int) -> np.ndarray:
        # cos(j * theta_k) = cos(pi * m / (2n)) with m = j(2k+1) mod 4n; fsum keeps each sum exact
        cosines = [math.cos(math.pi * m / (2 * n)) for m in range(4 * n)]
        values = [f((lo + hi) / 2 + (hi - lo) / 2 * cosines[2 * k + 1]) for k in range(n)]
        c = np.array(
            [math.fsum(v * cosines[j * (2 * k + 1) % (4 * n)] for k, v in enumerate(values)) * 2 / n for j in range(n)]
        )
        c[0] /= 2
        return c

    def __call__(self, x: np.ndarray) -> np.ndarray:
        a = np.clip(np.nan_to_num(x, nan=self.lo), self.lo, self.hi)
        scaled = (a - self.lo) / self.width
        piece = np.minimum(scaled.astype(np.intp), len(self.tables[0]) - 1)
        t = 2 * (scaled - piece) - 1  # the local variable in [-1, 1]
        # Clenshaw's recurrence for the Chebyshev series
        b1 = np.zeros_like(t)
        b2 = np.zeros_like(t)
        for table in reversed(self.tables[1:]):
            b1, b2 = 2 * t * b1 - b2 + np.take(table, piece), b1
        return t * b1 - b2 + np.take(self.tables[0], piece)


def _erfcx_seed(x: float) -> float:
    square = Fraction(x) ** 2
    high = float(square)
    return math.erfc(x) * math.exp(high) * math.exp(float(square - Fraction(high)))


_TOP = 12.0  # beyond, the asymptotic series


@cache
def _erfcx_plan() -> PiecewiseChebyshev:
    return PiecewiseChebyshev(_erfcx_seed, 0.0, _TOP, 0.25)


def _erfcx_asymptotic(x: np.ndarray) -> np.ndarray:
    """``1/(x√π) Σ (-1)^k (2k-1)!! / (2x²)^k`` for x >= 12 (ten terms reach an ulp)."""
    w = 1 / (2 * x * x)
    total = np.zeros_like(x)
    for k in range(10, 0, -1):
        total = -(2 * k - 1) * w * (1 + total)
    return (1 + total) / (x * math.sqrt(math.pi))


def exp_minus_square(x: np.ndarray, sign: float = -1.0) -> np.ndarray:
    """``exp(sign * x²)`` with ``x²`` split exactly (``x`` rounded to 24 bits, squared exactly,
    plus the rest); |x| is clipped to 40, where the result is already 0 or inf."""
    x = np.minimum(np.abs(x), 40.0)
    high = x.astype(np.float32).astype(np.float64)
    low = (x - high) * (x + high)
    return np.exp(sign * high * high) * np.exp(sign * low)


def _erfcx_positive(x: np.ndarray) -> np.ndarray:
    """erfcx for x >= 0 (nan stays nan)."""
    large = x > _TOP
    result = _erfcx_plan()(x)
    if large.any():
        result[large] = _erfcx_asymptotic(x[large])
    result[np.isnan(x)] = np.nan
    return result


def _flat(fn):
    """``fn`` on a 1-D float64 copy of its argument, reshaped back (0-dim arrays included)."""

    @functools.wraps(fn)
    def wrapper(x):
        x = np.asarray(x, np.float64)
        return fn(x.reshape(-1)).reshape(x.shape)

    return wrapper


@_flat
def erfcx(x: np.ndarray) -> np.ndarray:
    """The scaled complementary error function of a float64 array (a new array)."""
    with np.errstate(all="ignore"):
        result = _erfcx_positive(np.abs(x))
        negative = x < 0
        if negative.any():
            xn = x[negative]
            result[negative] = 2 * exp_minus_square(xn, 1.0) - result[negative]
    return result


@_flat
def erfc(x: np.ndarray) -> np.ndarray:
    """The complementary error function of a float64 array (a new array)."""
    with np.errstate(all="ignore"):
        magnitude = np.minimum(np.abs(x), 30.0)  # erfc(30) underflows; nan stays nan
        upper = exp_minus_square(magnitude) * _erfcx_positive(magnitude)
        return np.where(x < 0, 2 - upper, upper)


def _log_ndtr_lower(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log Φ(x)`` and ``Φ(x)/φ(x)`` for x <= 0, through ``t = -x/√2``:
    ``Φ(x) = erfcx(t) exp(-t²) / 2``."""
    t = -x / math.sqrt(2)
    scaled = _erfcx_positive(t)
    return np.log(scaled / 2) - t * t, scaled * math.sqrt(math.pi / 2)


# Abramowitz and Stegun 26.2.23: numerator and denominator, lowest power of t first
_GUESS = ((2.515517, 0.802853, 0.010328), (1.0, 1.432788, 0.189269, 0.001308))


@_flat
def ndtri(p: np.ndarray) -> np.ndarray:
    """The inverse normal distribution function of a float64 array (a new array)."""
    with np.errstate(all="ignore"):
        upper = p > 0.5
        q = np.where(upper, 1 - p, p)  # exact for p >= 1/2
        q = np.where((q > 0) & (q <= 0.5), q, 0.25)  # out-of-domain elements are replaced below
        t = np.sqrt(-2 * np.log(q))
        numerator = np.polynomial.polynomial.polyval(t, _GUESS[0])
        denominator = np.polynomial.polynomial.polyval(t, _GUESS[1])
        x = numerator / denominator - t
        log_q = np.log(q)
        for _ in range(2):  # Halley's steps: the error goes 4.5e-4 -> 1e-10 -> an ulp
            log_phi, ratio = _log_ndtr_lower(x)  # ratio = 1/g' for g = log Φ - log q
            g = log_phi - log_q
            x = np.minimum(x - 2 * g * ratio / (2 + g * (x * ratio + 1)), 0.0)
        x = np.where(upper, -x, x)
        x = np.where(p == 0.5, 0.0, x)
        x = np.where(p == 0, -np.inf, np.where(p == 1, np.inf, x))
        return np.where((p < 0) | (p > 1) | np.isnan(p), np.nan, x)


def float64_unary(op: str, fn, halves: bool = True):
    """The kernel of a one-input op whose result is ``fn`` of its float64 values: bool and
    integer inputs give the default float dtype; ``halves=False`` refuses float16 and
    bfloat16 (not implemented in ATen)."""

    def compute(x, buf):
        x = np.array(x, np.float64)  # a copy: out may alias self
        write(buf, fn(x.reshape(-1)).reshape(x.shape))

    inner = unary_kernel(op, compute, FLOAT, "bif")

    def kernel(self, out):
        if not halves and float_result_type(self).name in HALVES:
            fail(op, f"is not implemented for dtype {float_result_type(self)}")
        inner(self, out)

    kernel.__name__ = inner.__name__
    return kernel


for _op, _fn, _halves in (
    ("aten::erfc.out", erfc, True),
    ("aten::special_erfcx.out", erfcx, False),
    ("aten::special_ndtri.out", ndtri, False),
):
    register_kernel(_op, shape=broadcast_inputs)(float64_unary(_op, _fn, _halves))
