"""Orthogonal polynomials of torch.special: Chebyshev T, U, V, W (plain and shifted to [0, 1]),
Hermite H and He, Laguerre L and Legendre P, as ``(x, n)`` with Tensor and Scalar overloads.

As in ATen, x and n promote together (integers and bool to float32; float32 and float64 only),
n is cast to that dtype and truncated to an integer (nan, inf and out-of-range n count as
negative), a negative n gives 0, and the value comes from the three-term recurrence in the
op's dtype, stopped early where it turns nan. Chebyshev polynomials of high degree (n above
4 to 8) on the open interval use their trigonometric closed forms, and ``x = ±1`` (``0`` and
``1`` when shifted) their exact end values. Hermite polynomials of degree above 128 (float32)
or 512 (float64) are nan. Each step ``a * q - k * p`` rounds as the FMA that ATen's compiled
loop makes of it (float32 results match ATen's bit for bit). The recurrence runs once per
degree on the elements still going: its cost grows with the largest n (as ATen's loop does per
element). Where ATen reads an uninitialized value (nan x with n >= 2 for U, V, W, L and P) the
result here is nan. In float32 the closed forms round acos, cos and sin correctly (through
float64) where ATen takes glibc's float32 functions, not always correctly rounded; cos(n acos x)
multiplies a one-ulp difference in acos by n, so there the two agree to about n ulp.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import float_result_type
from torchedge.kernels.portable.common import as_scalar, fail, quiet
from torchedge.kernels.portable.elementwise import FAST_FLOATS, check_out, store
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.registry import register_kernel

__all__ = ["polynomial_kernel"]

_INT64_LIMIT = 2.0**63


def _degrees(n: np.ndarray) -> np.ndarray:
    """n (in the op's float dtype) as int64, truncated; what C++ cannot convert becomes -1."""
    valid = np.isfinite(n) & (n >= -_INT64_LIMIT) & (n < _INT64_LIMIT)
    return np.where(valid, np.trunc(np.where(valid, n, 0)), -1).astype(np.int64)


def _fused(a, b, c):
    """``a * b + c`` as the FMA that ATen's compiled loops contract it to: rounded once in float32
    (the float64 product of two float32 values is exact); in float64 rounded twice, except that
    a product past the range does not overflow when the sum is within it."""
    if b.dtype == np.float32:
        return (np.asarray(a, np.float64) * b.astype(np.float64) + c).astype(np.float32)
    result = a * b + c
    over = np.isinf(result)
    if over.any():
        half = (a * 0.5) * b + c * 0.5
        result = np.where(over & np.isfinite(half), half * 2, result)
    return result


def _libm(fn, a):
    """``fn`` of a float32 array rounded once from float64 (as a correctly rounded libm would)."""
    return fn(a.astype(np.float64)).astype(np.float32) if a.dtype == np.float32 else fn(a)


def _recurrence(x, n, p, q, r, step, first: int, stop, nan_stops: bool = True) -> np.ndarray:
    """Run ``r = step(k, x, p, q); p, q = q, r`` for k = first, first+1, ... while ``k < stop(n)``
    (and q is not nan, with ``nan_stops``), per element. ``r`` holds the result where no step runs.
    The elements still going are kept packed; those that stop leave their last value in ``r``."""
    where = np.arange(x.size)
    limit = stop(n)
    k = first
    going = k < limit
    if nan_stops:
        going &= ~np.isnan(q)
    while True:
        if not going.all():
            where, x, p, q, limit = where[going], x[going], p[going], q[going], limit[going]
        if not where.size:
            return r
        new = step(k, x, p, q)
        r[where] = new
        p, q = q, new
        k += 1
        going = k < limit
        if nan_stops:
            going &= ~np.isnan(q)


def _chebyshev(kind: str, threshold: int, shifted: bool):
    """T, U, V or W of degree n: end values, the closed form past ``threshold``, else the recurrence."""

    def fn(x, n):
        t = x.dtype.type
        y = x + x - t(1.0) if shifted else x
        nf = n.astype(x.dtype)
        top = (x == t(1.0)) if shifted else (np.abs(x) == t(1.0)) & (x > 0)
        bottom = (x == t(0.0)) if shifted else (np.abs(x) == t(1.0)) & ~(x > 0)
        odd = (n % 2) == 1
        sign = np.where(odd, t(-1.0), t(1.0))
        one = np.ones_like(x)
        ends = {"t": (one, sign), "u": (nf + 1, sign * (nf + 1)), "v": (one, sign * (nf + nf + 1))}
        ends["w"] = (nf + nf + 1, sign)
        result = np.where(n < 0, t(0.0), np.where(top, ends[kind][0], np.where(bottom, ends[kind][1], t(0.0))))
        done = top | bottom | (n < 0)
        closed = ~done & (n > threshold) & (np.abs(y) < t(1.0))
        if closed.any():
            result[closed] = _closed_form(kind, y[closed], n[closed], nf[closed], shifted)
        rest = ~done & ~closed
        if rest.any():
            result[rest] = _chebyshev_recurrence(kind, y[rest], n[rest])
        return result

    return fn


def _closed_form(kind: str, y, n, nf, shifted: bool):
    t = y.dtype.type
    theta = _libm(np.arccos, y)
    if kind == "t":
        return _libm(np.cos, nf * theta)
    sign = np.where(n % 2 == 1, t(-1.0), t(1.0))
    if kind == "u":
        s = _libm(np.sin, theta)
        scaled = (nf + 1) * theta
        return np.where(s != 0, _libm(np.sin, scaled) / s, (nf + 1) * _libm(np.cos, scaled) / y)
    half = theta / t(2.0)
    wave = (nf + t(0.5)) * theta
    if kind == "v":
        return np.where(_libm(np.sin, half) != 1, _libm(np.cos, wave) / _libm(np.cos, half), sign * (nf + nf + 1))
    edge = sign if shifted else np.where(y > 0, nf + nf + 1, sign)  # ATen's shifted W ignores the side
    return np.where(_libm(np.cos, half) != 1, _libm(np.sin, wave) / _libm(np.sin, half), edge)


def _chebyshev_recurrence(kind: str, y, n):
    t = y.dtype.type
    start = {"t": y, "u": y + y, "v": y + y - t(1.0), "w": y + y + t(1.0)}[kind]
    result = np.where(n == 0, t(1.0), start)
    many = n >= 2
    if many.any():
        ym, q = y[many], start[many].copy()
        r = ym.copy() if kind == "t" else np.full_like(ym, np.nan)  # ATen's U, V, W leave it unset
        result[many] = _recurrence(
            ym, n[many], np.ones_like(ym), q, r, lambda k, x, p, q: _fused(x + x, q, -p), 2, lambda m: m + 1
        )
    return result


def _low_degrees(x, n, one_value, fill_nan_above: int | None = None):
    """0 for n < 0, 1 for n = 0, ``one_value`` for n = 1; the rest (n >= 2) is nan for now."""
    t = x.dtype.type
    result = np.where(n < 0, t(0.0), np.where(n == 0, t(1.0), np.where(n == 1, one_value, t(np.nan))))
    many = n >= 2
    if fill_nan_above is not None:
        many &= n <= fill_nan_above
    return result, many


def _hermite_limit(dtype) -> int:
    return 128 if dtype == np.float32 else 512


def _hermite_h(x, n):
    result, many = _low_degrees(x, n, x + x, _hermite_limit(x.dtype))
    if many.any():
        xm = x[many]
        step = lambda k, x, p, q: _fused(x + x, q, -(x.dtype.type(2 * k) * p))  # noqa: E731
        r = np.zeros_like(xm)
        result[many] = _recurrence(xm, n[many], np.ones_like(xm), xm + xm, r, step, 1, lambda m: m, nan_stops=False)
    return result


def _hermite_he(x, n):
    result, many = _low_degrees(x, n, x, _hermite_limit(x.dtype))
    if many.any():
        xm = x[many]
        step = lambda k, x, p, q: _fused(x, q, -(x.dtype.type(k) * p))  # noqa: E731
        r = np.full_like(xm, np.nan)
        result[many] = _recurrence(xm, n[many], np.ones_like(xm), xm.copy(), r, step, 1, lambda m: m, nan_stops=False)
    return result


def _laguerre(x, n):
    t = x.dtype.type
    result, many = _low_degrees(x, n, t(1.0) - x)
    result = np.where((n >= 0) & (np.abs(x) == 0), t(1.0), result)
    many &= np.abs(x) != 0
    if many.any():
        xm = x[many]

        def step(k, x, p, q):
            return _fused(t(k + k) + (t(1.0) - x), q, -(t(k) * p)) / t(k + 1)

        r = np.full_like(xm, np.nan)
        result[many] = _recurrence(xm, n[many], np.ones_like(xm), t(1.0) - xm, r, step, 1, lambda m: m)
    return result


def _legendre(x, n):
    t = x.dtype.type
    result, many = _low_degrees(x, n, x)
    end = np.abs(x) == t(1.0)
    end_value = np.where((x > 0) | (n % 2 == 0), t(1.0), t(-1.0))
    result = np.where((n >= 0) & end, end_value, result)
    many &= ~end
    if many.any():
        xm = x[many]

        def step(k, x, p, q):
            return _fused(t(k + k + 1) * x, q, -(t(k) * p)) / t(k + 1)

        r = np.full_like(xm, np.nan)
        result[many] = _recurrence(xm, n[many], np.ones_like(xm), xm.copy(), r, step, 1, lambda m: m)
    return result


def polynomial_kernel(op: str, fn):
    """The kernel of ``op(x, n, out)``: x and n tensors (or one a Python number), ``fn(x, n)`` on
    flat arrays, x in the op's dtype and n its truncated int64 degree."""

    def kernel(x, n, out):
        dtype = float_result_type(x, n)
        if dtype not in FAST_FLOATS:
            fail(op, f"is not implemented for dtype {dtype}")
        check_out(op, dtype, out)
        xs = x.astype(dtype) if isinstance(x, np.ndarray) else as_scalar(x, dtype)
        ns = n.astype(dtype) if isinstance(n, np.ndarray) else as_scalar(n, dtype)
        xs, ns = np.broadcast_arrays(xs, ns)
        with quiet():
            result = fn(np.array(xs).reshape(-1), _degrees(ns.reshape(-1))).reshape(xs.shape)
        store(out, result, dtype)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


# each polynomial's Tensor, x-Scalar and n-Scalar out variants, and how it is computed
_OPS = [
    (
        (
            "aten::special_chebyshev_polynomial_t.out",
            "aten::special_chebyshev_polynomial_t.x_scalar_out",
            "aten::special_chebyshev_polynomial_t.n_scalar_out",
        ),
        _chebyshev("t", 6, False),
    ),
    (
        (
            "aten::special_chebyshev_polynomial_u.out",
            "aten::special_chebyshev_polynomial_u.x_scalar_out",
            "aten::special_chebyshev_polynomial_u.n_scalar_out",
        ),
        _chebyshev("u", 8, False),
    ),
    (
        (
            "aten::special_chebyshev_polynomial_v.out",
            "aten::special_chebyshev_polynomial_v.x_scalar_out",
            "aten::special_chebyshev_polynomial_v.n_scalar_out",
        ),
        _chebyshev("v", 8, False),
    ),
    (
        (
            "aten::special_chebyshev_polynomial_w.out",
            "aten::special_chebyshev_polynomial_w.x_scalar_out",
            "aten::special_chebyshev_polynomial_w.n_scalar_out",
        ),
        _chebyshev("w", 8, False),
    ),
    (
        (
            "aten::special_shifted_chebyshev_polynomial_t.out",
            "aten::special_shifted_chebyshev_polynomial_t.x_scalar_out",
            "aten::special_shifted_chebyshev_polynomial_t.n_scalar_out",
        ),
        _chebyshev("t", 6, True),
    ),
    (
        (
            "aten::special_shifted_chebyshev_polynomial_u.out",
            "aten::special_shifted_chebyshev_polynomial_u.x_scalar_out",
            "aten::special_shifted_chebyshev_polynomial_u.n_scalar_out",
        ),
        _chebyshev("u", 6, True),
    ),
    (
        (
            "aten::special_shifted_chebyshev_polynomial_v.out",
            "aten::special_shifted_chebyshev_polynomial_v.x_scalar_out",
            "aten::special_shifted_chebyshev_polynomial_v.n_scalar_out",
        ),
        _chebyshev("v", 6, True),
    ),
    (
        (
            "aten::special_shifted_chebyshev_polynomial_w.out",
            "aten::special_shifted_chebyshev_polynomial_w.x_scalar_out",
            "aten::special_shifted_chebyshev_polynomial_w.n_scalar_out",
        ),
        _chebyshev("w", 4, True),
    ),
    (
        (
            "aten::special_hermite_polynomial_h.out",
            "aten::special_hermite_polynomial_h.x_scalar_out",
            "aten::special_hermite_polynomial_h.n_scalar_out",
        ),
        _hermite_h,
    ),
    (
        (
            "aten::special_hermite_polynomial_he.out",
            "aten::special_hermite_polynomial_he.x_scalar_out",
            "aten::special_hermite_polynomial_he.n_scalar_out",
        ),
        _hermite_he,
    ),
    (
        (
            "aten::special_laguerre_polynomial_l.out",
            "aten::special_laguerre_polynomial_l.x_scalar_out",
            "aten::special_laguerre_polynomial_l.n_scalar_out",
        ),
        _laguerre,
    ),
    (
        (
            "aten::special_legendre_polynomial_p.out",
            "aten::special_legendre_polynomial_p.x_scalar_out",
            "aten::special_legendre_polynomial_p.n_scalar_out",
        ),
        _legendre,
    ),
]

for _names, _fn in _OPS:
    for _op in _names:
        register_kernel(_op, shape=broadcast_inputs)(polynomial_kernel(_op, _fn))
