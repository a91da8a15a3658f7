"""The error function and its inverse for NumPy arrays (NumPy has none, and the runtime has no SciPy).

Two ``erf`` methods, by precision:

* float32 (also used for float16 and bfloat16 results): ``erf(x) = x * P(x²) / Q(x²)`` on
  ``x`` clamped to ±3.7086 (where the rational reaches ±1; erf is within 2 ulp of ±1 there),
  a rational minimax approximation
  accurate to about 4 ulp, evaluated with Horner's rule in float32, block by block
  (`ErfRational`). GELU uses it too.
* float64: ``erf(x) = x * g(|x|)`` with ``g(a) = erf(a) / a``, which is smooth and keeps the
  relative accuracy of erf near zero. ``g`` is approximated piecewise on intervals of
  equal width up to ``top``: one polynomial per interval, in the local variable ``t`` in
  [-1, 1], evaluated with Horner's rule on coefficients gathered per element, with no
  boolean masks. The coefficients are Chebyshev interpolants of
  ``math.erf``, computed once when first needed. ``erfinv`` refines its float32 guesses
  with this method too: near ±1 it needs erf to better than the rational's few ulp.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from numpy.polynomial import chebyshev

from torchedge.kernels.portable.bounds import CLIP

__all__ = ["erf", "erfinv", "erf_block32", "ErfRational"]


def _g(a: float) -> float:
    return math.erf(a) / a


def _chebyshev(lo: float, hi: float, n: int) -> np.ndarray:
    """Chebyshev coefficients of the interpolant of `_g` at n first-kind nodes of [lo, hi]."""
    # cos(j * theta_k) = cos(pi * m / (2n)) with m = j(2k+1) mod 4n, an exact reduction;
    # exact sums (fsum) keep the rounding of the coefficients near one ulp of g.
    cosines = [math.cos(math.pi * m / (2 * n)) for m in range(4 * n)]
    values = [_g((lo + hi) / 2 + (hi - lo) / 2 * cosines[2 * k + 1]) for k in range(n)]
    c = np.array(
        [math.fsum(v * cosines[j * (2 * k + 1) % (4 * n)] for k, v in enumerate(values)) * 2 / n for j in range(n)]
    )
    c[0] /= 2
    return c


class _ErfPlan:
    """Piecewise polynomials for g with relative error about ``tol``, evaluated in ``dtype``."""

    def __init__(self, tol: float, top: float, width: float, dtype, nodes: int = 24):
        self.top, self.width, self.dtype = top, width, np.dtype(dtype)
        pieces = [_chebyshev(lo, lo + width, nodes) for lo in np.arange(0.0, top, width)]
        degree = max(int(np.nonzero(np.abs(c) >= tol * abs(c[0]))[0][-1]) + 1 for c in pieces)
        monomials = np.array([chebyshev.cheb2poly(c[:degree]) for c in pieces])  # low power first
        # one table per power, highest first, each indexed by the interval number
        self.columns = [np.ascontiguousarray(monomials[:, k], dtype=self.dtype) for k in range(degree - 1, -1, -1)]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return self._evaluate(x)

    def _evaluate(self, x: np.ndarray) -> np.ndarray:
        a = np.abs(x).astype(self.dtype)
        np.minimum(a, self.dtype.type(self.top), out=a)  # nan stays nan
        scaled = a * self.dtype.type(1 / self.width)
        piece = scaled.astype(np.intp)  # nan gives garbage, clipped below: the result stays nan
        t = scaled
        t *= 2
        t -= (2 * piece + 1).astype(self.dtype)
        result = np.take(self.columns[0], piece, mode="clip")
        for column in self.columns[1:]:
            result *= t
            result += np.take(column, piece, mode="clip")
        result *= a
        np.minimum(result, 1, out=result)
        return np.copysign(result, x.astype(self.dtype, copy=False), out=result)


@cache
def _plan(single: bool) -> _ErfPlan:
    # erfc(4) < 2**-25 and erfc(6) < 2**-54: beyond those erf rounds to exactly 1.
    if single:
        return _ErfPlan(tol=3e-8, top=4.0, width=0.25, dtype=np.float32)
    return _ErfPlan(tol=2e-16, top=6.0, width=0.25, dtype=np.float64)


# Coefficients of P and Q for the float32 method, lowest power of x² first (the rational
# approximation Eigen and XLA use for float erf).
_P32 = tuple(
    np.float32(c)
    for c in (
        -1.60960333262415e-02,
        -2.95459980854025e-03,
        -7.34990630326855e-04,
        -5.69250639462346e-05,
        -2.10102402082508e-06,
        2.77068142495902e-08,
        -2.72614225801306e-10,
    )
)
_Q32 = tuple(
    np.float32(c)
    for c in (
        -1.42647390514189e-02,
        -7.37332916720468e-03,
        -1.68282697438203e-03,
        -2.13374055278905e-04,
        -1.45660718464996e-05,
    )
)


class ErfRational:
    """``xc * P(xc²) / Q(xc²)`` with ``xc = clip(x, -limit, limit)``, block by block, P and Q
    given in powers of ``xc²`` (lowest first, ``len(p) >= len(q) >= 2``). The rational
    approximates an odd function that tends to ``±bound``; ``limit`` is the float32 clamp where
    the rational, as evaluated here, reaches ``bound`` exactly, with no value beyond it on the
    way (a test checks every float32 where it comes within about 1e-3 of the bound): far out the
    result is exactly ``±bound`` (GELU's ``x * (1/2 + ratio)`` is exactly 0 or x) with no clip
    of the ratio.

    Both polynomials are divided by Q's leading coefficient, so Q's Horner rule starts with one
    addition; P's top terms run alone, then the last steps of both as one (2, block) array (the
    same float32 operations per element as two separate Horner loops). In blocks of `BLOCK`
    elements, so the scratch rows have a fixed size whatever the input's; the coefficients and
    clip bounds are float32 0-d arrays. Every element goes through the same Horner steps in
    float32, which is what ``limit`` is computed for."""

    BLOCK = 1 << 15

    def __init__(self, p, q, limit: float, bound: float):
        if not 2 <= len(q) <= len(p):
            raise ValueError("ErfRational needs Q of degree 1 or more and P of at least Q's degree")
        top = float(q[-1])
        p, q = [float(c) / top for c in p], [float(c) / top for c in q]
        m = len(q) - 1  # Q's degree; Q is now monic
        # P's Horner steps down to the power m - 1 alone (highest first); then Q's (u + q[m-1])
        # and both polynomials' steps for the powers m - 2 ... 0 as (2, 1) columns
        self.p_top = [np.array(c, np.float32) for c in reversed(p[m - 1 :])]
        self.q_top = np.array(q[m - 1], np.float32)
        self.joint = [np.array([[p[k]], [q[k]]], np.float32) for k in range(m - 2, -1, -1)]
        self.limit, self.bound = float(np.float32(limit)), float(bound)
        self._clips = (np.array(-self.limit, np.float32), np.array(self.limit, np.float32))

    def blocks(self, flat: np.ndarray):
        """Yield ``(start, x, ratio)`` per block of the 1-D float32 ``flat``: ``ratio`` (a scratch
        row, valid until the next block) holds ``xc * P / Q`` of the block ``x``."""
        n = flat.size
        if n == 0:
            return
        rows = np.empty((4, self.BLOCK), np.float32)
        low, high = self._clips
        multiply, add = np.multiply, np.add
        for start in range(0, n, self.BLOCK):
            x = flat[start : start + self.BLOCK]
            m = x.size
            xc, u = rows[0, :m], rows[1, :m]
            both = rows[2:, :m]
            num, den = both
            CLIP(x, low, high, out=xc)  # nan stays nan
            multiply(xc, xc, u)
            multiply(u, self.p_top[0], num)
            add(num, self.p_top[1], num)
            for c in self.p_top[2:]:
                multiply(num, u, num)
                add(num, c, num)
            add(u, self.q_top, den)
            for column in self.joint:
                multiply(both, u, both)
                add(both, column, both)
            multiply(num, xc, num)
            np.divide(num, den, num)
            yield start, x, num


# erf(x) on |x| <= 3.7086334, where the rational reaches 1 (erf(3.7086334) rounds to 1 - 2**-24)
_ERF32 = ErfRational(_P32, _Q32, 3.7086334, 1.0)


def erf_block32(block: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The float32 method on a block of any shape into ``out`` (of its size)."""
    flat = np.ascontiguousarray(block, np.float32).reshape(-1)
    target = out.reshape(-1)
    with np.errstate(invalid="ignore"):
        for start, _, ratio in _ERF32.blocks(flat):
            target[start : start + ratio.size] = ratio
    return out


def _erf_float32(x: np.ndarray) -> np.ndarray:
    out = np.empty(np.shape(x), np.float32)
    erf_block32(x, out)
    return out


def erf(x: np.ndarray, single: bool = False, precise: bool = False) -> np.ndarray:
    """erf of an array: in float32 with ``single=True`` (for float32 and 16-bit float
    results: the rational method, about 4 ulp, or with ``precise`` the piecewise one,
    about 2 ulp), else in float64 (to a few ulp)."""
    x = np.asarray(x)
    if single and not precise:
        return _erf_float32(x)
    if x.ndim == 0:  # ufuncs turn 0-dim arrays into scalars, which can't be written in place
        return _plan(single)(x.reshape(1)).reshape(())
    return _plan(single)(x)


# ATen's calc_erfinv: a rational first guess (central part, then tails), two Newton steps.
# Polynomial coefficients, lowest power first.
_CENTRAL = (
    [0.886226899, -1.645349621, 0.914624893, -0.140543331],
    [1.0, -2.118377725, 1.442710462, -0.329097515, 0.012229801],
)
_TAIL = ([-1.970840454, -1.624906493, 3.429567803, 1.641345311], [1.0, 3.543889200, 1.637067800])


def _polynomial(coefficients, z: np.ndarray) -> np.ndarray:
    """Horner's rule, coefficients lowest power first (at least two)."""
    result = z * coefficients[-1]
    result += coefficients[-2]
    for c in reversed(coefficients[:-2]):
        result *= z
        result += c
    return result


def erfinv(y: np.ndarray, single: bool = False) -> np.ndarray:
    """The inverse error function as ATen computes it (in float32 with ``single=True``, else
    float64): nan outside [-1, 1], +-inf at +-1. Returns an array of at least one dim."""
    dtype = np.float32 if single else np.float64
    y = np.atleast_1d(np.asarray(y, dtype))
    magnitude = np.abs(y)
    with np.errstate(all="ignore"):
        z = y * y
        central = y * _polynomial(_CENTRAL[0], z) / _polynomial(_CENTRAL[1], z)
        t = np.sqrt(-np.log((1 - magnitude) / 2))
        tail = np.copysign(_polynomial(_TAIL[0], t), y) / _polynomial(_TAIL[1], t)
        # Newton steps in float64 even for a float32 result: in float32, erf(x) - y cancels to
        # a few ulp of y, which near |y| = 1 moves x by more than float32's tolerance.
        x = np.where(magnitude <= 0.7, central, tail).astype(np.float64)
        target = y.astype(np.float64)
        slope = 2 / math.sqrt(math.pi)  # erf'(x) = slope * exp(-x^2)
        for _ in range(2):
            x -= (erf(x, False, precise=True) - target) / (slope * np.exp(-x * x))
        x = x.astype(dtype)
        np.copyto(x, np.copysign(dtype(np.inf), y), where=magnitude == 1)
    return x
