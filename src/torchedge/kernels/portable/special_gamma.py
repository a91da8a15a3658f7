"""The gamma family: ``lgamma``, ``digamma``, ``polygamma``, ``mvlgamma`` and ``special_zeta``.

Everything is computed in float64 and rounded once into the result dtype.

* ``lgamma``, ``digamma`` and the trigamma function use their asymptotic (Stirling) series
  in ``1/x`` for x >= 10, where eight terms reach an ulp; smaller positive arguments first
  step up to 10 with the recurrences ``Γ(x+1) = xΓ(x)``, ``ψ(x+1) = ψ(x) + 1/x`` and
  ``ψ'(x+1) = ψ'(x) - 1/x²``, and negative ones reflect (``Γ(x)Γ(1-x) = π/sin(πx)`` and its
  derivatives), as ATen does: the same poles, and the same finite values where ATen's
  ``sin(πx)`` misses a pole by a rounding.
* ``zeta(s, q) = Σ (q+k)^-s``, the Hurwitz zeta function: the first terms summed until
  ``q+k`` reaches 10, then the Euler-Maclaurin tail with twelve Bernoulli terms.
  ``polygamma(n, x) = (-1)^(n+1) n! zeta(n+1, x)`` for n >= 2.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.portable.elementwise import FLOAT, binary, check_out, compute_dtype
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.portable.special_error import HALVES, float64_unary
from torchedge.kernels.portable.unary import unary_kernel
from torchedge.kernels.registry import register_kernel

__all__ = ["lgamma", "digamma", "trigamma", "zeta", "polygamma", "stirling_correction"]

# Bernoulli numbers B2, B4, ..., B24
_BERNOULLI = (
    1 / 6,
    -1 / 30,
    1 / 42,
    -1 / 30,
    5 / 66,
    -691 / 2730,
    7 / 6,
    -3617 / 510,
    43867 / 798,
    -174611 / 330,
    854513 / 138,
    -236364091 / 2730,
)
_STEP_UP = 10.0  # the asymptotic series are used from here on
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _series(coefficients, w: np.ndarray) -> np.ndarray:
    """``Σ c_k w^k`` for k = 1.. (Horner's rule)."""
    total = np.zeros_like(w)
    for c in reversed(coefficients):
        total = (total + c) * w
    return total


def stirling_correction(x: np.ndarray) -> np.ndarray:
    """``lgamma(x) - ((x - 1/2) log x - x + log(2π)/2)`` for x >= 10."""
    coefficients = [b / (2 * k * (2 * k - 1)) for k, b in enumerate(_BERNOULLI[:8], 1)]
    return _series(coefficients, 1 / (x * x)) * x


def _step_up(x: np.ndarray, update) -> np.ndarray:
    """Move each element of x (>= 1/2 or so) up to ``_STEP_UP`` by unit steps, calling
    ``update(z, moving)`` before each step with the current values and the mask of those
    that still move. Returns the final values (nan stays nan)."""
    z = x.copy()
    for _ in range(int(_STEP_UP) + 1):
        moving = z < _STEP_UP
        if not moving.any():
            break
        update(z, moving)
        z = np.where(moving, z + 1, z)
    return z


def _sin_pi_reduced(x: np.ndarray) -> np.ndarray:
    """``|sin(πx)|`` with x reduced to [-1/2, 1/2] exactly first."""
    return np.abs(np.sin(math.pi * (x - np.round(x))))


def lgamma(x: np.ndarray) -> np.ndarray:
    """log|Γ(x)| of a float64 array (a new array): +inf at the poles and at ±inf."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        reflect = x < 0.5
        z0 = np.where(reflect, 1 - x, x)
        z0 = np.where(np.isinf(z0), _STEP_UP, z0)  # ±inf: replaced below
        product = np.ones_like(z0)

        def update(z, moving):
            np.multiply(product, np.where(moving, z, 1.0), out=product)

        z = _step_up(z0, update)
        positive = (z - 0.5) * np.log(z) - z + _HALF_LOG_2PI + stirling_correction(z) - np.log(product)
        reflected = math.log(math.pi) - np.log(_sin_pi_reduced(x)) - positive
        result = np.where(reflect, reflected, positive)
        result = np.where((x == 1) | (x == 2), 0.0, result)
        return np.where(np.isinf(x), np.inf, result)


def digamma(x: np.ndarray) -> np.ndarray:
    """ψ(x) of a float64 array (a new array): nan at negative integers and -inf, ∓inf at ±0."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        reflect = x < 0
        z0 = np.where(reflect, 1 - x, x)
        z0 = np.where(np.isinf(z0) | (z0 == 0), _STEP_UP, z0)  # replaced below
        shift = np.zeros_like(z0)

        def update(z, moving):
            np.add(shift, np.where(moving, 1 / z, 0.0), out=shift)

        z = _step_up(z0, update)
        coefficients = [b / (2 * k) for k, b in enumerate(_BERNOULLI[:8], 1)]
        positive = np.log(z) - 0.5 / z - _series(coefficients, 1 / (z * z)) - shift
        fraction = x - np.trunc(x)
        reflected = positive - math.pi / np.tan(math.pi * fraction)
        result = np.where(reflect, np.where(fraction == 0, np.nan, reflected), positive)
        result = np.where(x == 0, np.copysign(np.inf, -x), result)
        return np.where(x == np.inf, np.inf, np.where(x == -np.inf, np.nan, result))


def trigamma(x: np.ndarray) -> np.ndarray:
    """ψ'(x) of a float64 array (a new array); below 1/2 through ``π²/sin²(πx) - ψ'(1-x)``."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        reflect = x < 0.5
        z0 = np.where(reflect, 1 - x, x)
        z0 = np.where(np.isinf(z0), _STEP_UP, z0)  # replaced below
        shift = np.zeros_like(z0)

        def update(z, moving):
            np.add(shift, np.where(moving, 1 / (z * z), 0.0), out=shift)

        z = _step_up(z0, update)
        w = 1 / z
        positive = w + 0.5 * w * w + _series(_BERNOULLI[:8], w * w) * w + shift
        reflected = (math.pi / np.sin(math.pi * x)) ** 2 - positive
        result = np.where(reflect, reflected, positive)
        return np.where(x == np.inf, 0.0, np.where(x == -np.inf, np.nan, result))


def _direct_sum(s: np.ndarray, q: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Add ``Σ (q+k)^-s`` over k = 0.. while ``q+k < 10`` (at least 10 terms) to ``total``;
    returns ``q`` moved past them. Far negative q are summed in blocks of 256 terms."""
    for _ in range(10):
        total += q**-s
        q = q + 1
    behind = np.nonzero(q < _STEP_UP)[0]
    for _ in range(64):  # one term at a time for the near ones
        if not behind.size:
            return q
        total[behind] += q[behind] ** -s[behind]
        q[behind] += 1
        behind = behind[q[behind] < _STEP_UP]
    steps = np.arange(256.0)
    while behind.size:
        qb, sb = q[behind], s[behind]
        count = np.ceil(_STEP_UP - qb)
        terms = np.where(steps < count[:, None], (qb[:, None] + steps) ** -sb[:, None], 0.0)
        total[behind] += terms.sum(axis=1)
        q[behind] = qb + np.minimum(count, 256.0)
        behind = behind[q[behind] < _STEP_UP]
    return q


def zeta(s: np.ndarray | float, q: np.ndarray | float) -> np.ndarray:
    """The Hurwitz zeta function of float64 arrays (broadcast; a new array)."""
    s, q = np.broadcast_arrays(np.asarray(s, np.float64), np.asarray(q, np.float64))
    shape = s.shape
    s, q = s.ravel(), q.ravel()
    with np.errstate(all="ignore"):
        whole_q = (q <= 0) & (q == np.floor(q))  # poles, before any nan but s == 1 and s < 1
        signed = (q < 0) & (s != np.floor(s))  # q^-s is not real
        infinite_s = s == np.inf
        good = ~(np.isnan(s) | np.isnan(q) | (s <= 1) | whole_q | signed | infinite_s | (q == np.inf))
        sg, qg = s[good], q[good]
        total = np.zeros_like(sg)
        a = _direct_sum(sg, qg.copy(), total)
        power = a**-sg
        tail = power * a / (sg - 1) + power / 2
        # Euler-Maclaurin: Σ B_2j / (2j)! s(s+1)...(s+2j-2) a^(-s-2j+1); for huge s the rising
        # product overflows where the power underflows: nan, as in ATen
        rising, fall = sg.copy(), power / a
        for j, b in enumerate(_BERNOULLI, 1):
            tail += b / math.factorial(2 * j) * rising * fall
            rising = rising * (sg + 2 * j - 1) * (sg + 2 * j)
            fall = fall / (a * a)
        # ATen stops summing where a term falls below an ulp of the sum (never for 0/0)
        converged = np.abs((a - 1) ** -sg) < np.finfo(np.float64).eps / 2 * np.abs(total)
        tail = np.where(converged, 0.0, tail)
        result = np.full_like(s, np.nan)
        result[good] = total + tail
        result[infinite_s] = np.where(q[infinite_s] < 1, np.inf, np.where(q[infinite_s] == 1, 1.0, np.nan))
        result[np.isnan(q) | (q == np.inf) | signed] = np.nan
        result[whole_q] = np.inf
        result[s < 1] = np.nan
        result[s == 1] = np.inf
        return result.reshape(shape)


def polygamma(n: int, x: np.ndarray, single: bool = False) -> np.ndarray:
    """The n-th derivative of ψ of a float64 array (a new array), n >= 0. With ``single``
    (float32 and 16-bit results) n! = exp(lgamma(n+1)) and ζ are float32, as ATen computes
    them: n! is off by a few ulp and overflows from n = 35, and ζ underflows."""
    if n == 0:
        return digamma(x)
    if n == 1:
        return trigamma(x)
    try:
        factorial = math.exp(math.lgamma(n + 1))
    except OverflowError:
        factorial = math.inf
    with np.errstate(all="ignore"):
        z = zeta(float(n + 1), x)
        if single:
            factorial32 = np.exp(np.float32(math.lgamma(n + 1)))
            return (-1) ** (n + 1) * factorial32 * z.astype(np.float32)
        return (-1) ** (n + 1) * factorial * z


register_kernel("aten::lgamma.out", shape=broadcast_inputs)(float64_unary("aten::lgamma.out", lgamma))
register_kernel("aten::digamma.out", shape=broadcast_inputs)(float64_unary("aten::digamma.out", digamma))


@register_kernel("aten::polygamma.out", shape=broadcast_inputs)
def polygamma_out(n, self, out):
    """``polygamma(n, self)``: the default float dtype for bool and integer inputs."""
    op = "aten::polygamma.out"
    check(n >= 0, op, f"does not support negative n, got n = {n}")

    def compute(x, buf):
        x = np.array(x, np.float64)  # a copy: out may alias self
        write(buf, polygamma(n, x.reshape(-1), single=buf.itemsize < 8).reshape(x.shape))

    unary_kernel(op, compute, FLOAT, "bif")(self, out)


@register_kernel("aten::mvlgamma.out", shape=broadcast_inputs)
def mvlgamma(self, p, out):
    """The multivariate log-gamma ``p(p-1)/4 log π + Σ_j lgamma(x - j/2)``, j < p (like ATen,
    for every x: log|Γ_p(x)| is defined below (p-1)/2 too)."""
    op = "aten::mvlgamma.out"
    check(self.dtype != np.bool_, op, "the input tensor may not be a boolean tensor")
    check(p >= 1, op, f"p has to be greater than or equal to 1, got p = {p}")
    dtype = compute_dtype(FLOAT, self)
    check_out(op, dtype, out)
    x = np.array(self, np.float64)
    with quiet():
        result = np.full(x.shape, p * (p - 1) / 4 * math.log(math.pi))
        for j in range(p):
            result += lgamma(x - j / 2)
        write(out, result.astype(dtype))


def _zeta_compute(a, b, buffer, dtype):
    write(buffer, zeta(a, b))


@register_kernel(
    "aten::special_zeta.out",
    "aten::special_zeta.self_scalar_out",
    "aten::special_zeta.other_scalar_out",
    shape=broadcast_inputs,
)
def special_zeta(self, other, out):
    """The Hurwitz zeta function ``Σ (other+k)^-self``: float results (not float16 or bfloat16)."""
    op = "aten::special_zeta.out"
    if not isinstance(self, np.ndarray) and not isinstance(other, np.ndarray):
        fail(op, "expects at least one tensor argument")
    dtype = compute_dtype(FLOAT, self, other)
    if dtype.name in HALVES:
        fail(op, f"is not implemented for dtype {dtype}")
    binary(op, _zeta_compute, FLOAT, self, other, out, opmath=True)
