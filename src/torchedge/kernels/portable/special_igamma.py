"""The regularized incomplete gamma functions ``igamma`` (P) and ``igammac`` (Q = 1 - P).

Computed in float64 and rounded once into the result dtype, with ``D = x^a e^-x / Γ(a)``
(its logarithm through ``log1p`` and the Stirling series for a >= 10, so that it keeps its
accuracy when a and x are large and close):

* x < a + 1: the power series ``P = D/a Σ x^k / ((a+1)...(a+k))``, and ``Q = 1 - P``; for
  a < 0.3, where Q may be tiny, ``Q = -expm1(a log x - lgamma(1+a)) - a x^a/Γ(a+1)
  Σ_k>=1 (-x)^k / (k! (a+k))`` with ``lgamma(1+a)`` from its Taylor series (ζ(k)/k).
* x >= a + 1: the continued fraction of ``Q / D`` (Legendre's, by the modified Lentz
  method), and ``P = 1 - Q``.

The series and the fraction run until each element has converged: the elements still
running are gathered every step, so the cost follows the slowest elements only (about
``8 sqrt(a)`` steps when x is close to a large a).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from torchedge.kernels.portable.common import write
from torchedge.kernels.portable.elementwise import SAME, binary
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.portable.special_gamma import lgamma, stirling_correction, zeta
from torchedge.kernels.registry import register_kernel

__all__ = ["igamma", "igammac", "regularized_gamma"]

_EPS = np.finfo(np.float64).eps / 2
_TINY = 1e-300
_SMALL_A = 0.3
_EULER = 0.5772156649015329


@cache
def _lgamma1p_coefficients() -> np.ndarray:
    """Taylor coefficients of lgamma(1+a), from a^1 up: -γ, then (-1)^k ζ(k)/k."""
    k = np.arange(2.0, 40.0)
    return np.concatenate([[-_EULER], (-1) ** k * zeta(k, 1.0) / k])


def _lgamma1p(a: np.ndarray) -> np.ndarray:
    """lgamma(1+a) for |a| <= 0.3, to an ulp relative to a."""
    total = np.zeros_like(a)
    for c in reversed(_lgamma1p_coefficients()):
        total = (total + c) * a
    return total


def _log_prefix(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``log(x^a e^-x / Γ(a))``."""
    large = a >= 10
    safe = np.where(large, a, 10.0)
    d = (x - safe) / safe
    near = np.abs(d) < 0.5  # log1p(d) - d without the rounding of x/a - 1 far from it
    stirling = (
        safe * np.where(near, np.log1p(np.where(near, d, 0.0)) - d, np.log(x / safe) - d)
        + 0.5 * np.log(safe / (2 * math.pi))
        - stirling_correction(safe)
    )
    return np.where(large, stirling, a * np.log(x) - x - lgamma(a))


def _iterate(step, state: list, finished) -> list:
    """Run ``state = step(i, state)`` (i = 1, 2, ...) on 1-D arrays until ``finished(state)``
    holds for every element; converged elements leave the running arrays (which are
    compacted when a tenth has left). Returns the final state, in the original order."""
    final = [array.copy() for array in state]
    where = np.arange(state[0].size)
    i = 0
    while where.size:
        i += 1
        state = step(i, state)
        done = finished(state)
        if done.sum() * 10 >= done.size or done.all():
            for target, array in zip(final, state):
                target[where[done]] = array[done]
            keep = ~done
            where = where[keep]
            state = [array[keep] for array in state]
    return final


def _power_series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``Σ_k x^k / ((a+1)...(a+k))`` until the terms fall below an ulp of the sum."""

    def step(i, state):
        x, denominator, term, total = state
        denominator = denominator + 1
        term = term * x / denominator
        return [x, denominator, term, total + term]

    ones = np.ones_like(a)
    return _iterate(step, [x, a.copy(), ones, ones.copy()], lambda s: ~(s[2] > _EPS * s[3]))[3]


def _continued_fraction(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``Q(a, x) / D`` by the modified Lentz method (x >= a + 1)."""

    def step(i, state):
        a, b, c, d, h, delta = state
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = 1 / np.where(np.abs(d) < _TINY, _TINY, d)
        c = b + an / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        delta = d * c
        return [a, b, c, d, h * delta, delta]

    b = x + 1 - a
    d = 1 / b
    state = [a, b, np.full_like(a, 1 / _TINY), d, d.copy(), np.zeros_like(a)]
    return _iterate(step, state, lambda s: ~(np.abs(s[5] - 1) > _EPS))[4]


def _small_a_complement(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) for a < 0.3 and x < a + 1, without cancellation when Q is tiny."""
    exponent = a * np.log(x) - _lgamma1p(a)
    series = np.zeros_like(a)
    term = np.ones_like(a)
    for k in range(1, 32):  # x < 1.3: x^k/k! falls below an ulp well before
        term = term * -x / k
        series += term / (a + k)
    return -np.expm1(exponent) - a * np.exp(exponent) * series


def regularized_gamma(a, x, upper: bool) -> np.ndarray:
    """P(a, x), or Q(a, x) with ``upper``, of float64 arrays (broadcast; a new array)."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    shape = a.shape
    a, x = a.ravel(), x.ravel()
    with np.errstate(all="ignore"):
        result = np.empty(a.shape)
        good = (a > 0) & (x > 0) & (a < np.inf) & (x < np.inf)
        ag, xg = a[good], x[good]
        lower = np.empty_like(ag)
        series = xg < ag + 1
        a_s, x_s = ag[series], xg[series]
        log_d = _log_prefix(a_s, x_s)
        p = np.exp(log_d - np.log(a_s)) * _power_series(a_s, x_s)
        small = a_s < _SMALL_A
        q = np.where(small, 0.0, 1 - p)
        if small.any():
            q[small] = _small_a_complement(a_s[small], x_s[small])
        lower[series] = q if upper else p
        a_f, x_f = ag[~series], xg[~series]
        q = np.exp(_log_prefix(a_f, x_f)) * _continued_fraction(a_f, x_f)
        lower[~series] = q if upper else 1 - q
        result[good] = lower
        # the edges, in ATen's order of precedence: P(a, inf) = 1, P(inf, x) = 0, P(a, 0) = 0,
        # P(0, x > 0) = 1, negative arguments nan (even where the other one is nan)
        edges = np.full(a.shape, np.nan)
        edges[x == np.inf] = 1.0
        edges[a == np.inf] = np.where(x[a == np.inf] == np.inf, np.nan, 0.0)
        edges[x == 0] = 0.0
        edges[a == 0] = np.where(x[a == 0] > 0, 1.0, np.nan)
        edges[(a < 0) | (x < 0)] = np.nan
        if upper:
            edges = 1 - edges
        result[~good] = edges[~good]
        return result.reshape(shape)


def igamma(a, x) -> np.ndarray:
    return regularized_gamma(a, x, upper=False)


def igammac(a, x) -> np.ndarray:
    return regularized_gamma(a, x, upper=True)


def _kernel(op: str, fn):
    def compute(a, x, buffer, dtype):
        write(buffer, fn(a, x))

    def kernel(self, other, out):
        binary(op, compute, SAME, self, other, out, kinds="f", opmath=True)

    kernel.__name__ = fn.__name__
    return kernel


register_kernel("aten::igamma.out", shape=broadcast_inputs)(_kernel("aten::igamma.out", igamma))
register_kernel("aten::igammac.out", shape=broadcast_inputs)(_kernel("aten::igammac.out", igammac))
