"""float64 accuracy of the gamma and error-function kernels against mpmath (40 digits), where
eager itself loses digits (trigamma, igammac of tiny a, roots of lgamma and digamma, tails)."""

from __future__ import annotations

import numpy as np
import pytest

from torchedge.kernels.registry import get_kernel

mpmath = pytest.importorskip("mpmath")
mpmath.mp.dps = 40


def kernel(op, *args):
    like = next(a for a in args if isinstance(a, np.ndarray))
    out = np.empty(np.broadcast_shapes(*[a.shape for a in args if isinstance(a, np.ndarray)]), like.dtype)
    get_kernel(op).fn(*args, out)
    return out


def check(got, want, rtol=2e-14, atol=0.0):
    np.testing.assert_allclose(got, np.array(want, np.float64), rtol=rtol, atol=atol)


X = np.array([1e-8, 0.3, 0.9999, 1.0001, 1.4616321449683622, 1.9999, 2.0001, 3.7, 9.5, 10.5, 55.0, 1e4, 1e12])
NEGATIVE = np.array([-0.3, -1.5, -2.4570247382208006, -2.7477, -9.75, -100.25])


def test_lgamma_near_its_roots_and_for_negative_x():
    """Relative accuracy everywhere but near the roots (1, 2, -2.457...), where the
    recurrences leave an absolute error of a few ulp of lgamma(10)."""
    x = np.concatenate([X, NEGATIVE])
    want = [float(mpmath.log(abs(mpmath.gamma(mpmath.mpf(v))))) for v in x]
    check(kernel("aten::lgamma.out", x), want, rtol=1e-13, atol=5e-15)


def test_digamma_and_trigamma():
    x = np.concatenate([X, NEGATIVE])
    check(kernel("aten::digamma.out", x), [float(mpmath.psi(0, v)) for v in x], rtol=1e-13, atol=1e-15)
    check(kernel("aten::polygamma.out", 1, x), [float(mpmath.psi(1, v)) for v in x], rtol=1e-13)
    check(kernel("aten::polygamma.out", 4, x[:10]), [float(mpmath.psi(4, v)) for v in x[:10]], rtol=1e-13)


@pytest.mark.parametrize(
    ("a", "x"),
    [(1e-300, 1.0), (1e-10, 0.5), (1e-5, 2.0), (0.01, 0.2), (0.25, 0.1), (2.5, 3.0), (19.3, 1e-12), (100.0, 83.07)],
)
def test_incomplete_gamma(a, x):
    lower = float(mpmath.gammainc(a, 0, x, regularized=True))
    upper = float(mpmath.gammainc(a, x, mpmath.inf, regularized=True))
    check(kernel("aten::igamma.out", np.array([a]), np.array([x])), [lower], rtol=1e-13)
    check(kernel("aten::igammac.out", np.array([a]), np.array([x])), [upper], rtol=1e-13)


def test_zeta():
    s = np.array([1.5, 2.0, 3.0, 7.5, 40.0])
    q = np.array([0.01, 1.0, 3.3, 12.0, 1e3])
    got = kernel("aten::special_zeta.out", s[:, None], q[None, :])
    with mpmath.workdps(250):  # mpmath's Hurwitz zeta needs many digits for large q
        want = [[float(mpmath.zeta(a, b)) for b in q] for a in s]
    check(got, want, rtol=1e-13)


def test_error_functions():
    x = np.array([-26.0, -5.0, -0.5, 1e-10, 0.5, 3.0, 11.9, 12.1, 26.5, 1e5])
    check(kernel("aten::erfc.out", x), [float(mpmath.erfc(v)) for v in x], rtol=1e-13)
    want = [float(mpmath.erfc(v) * mpmath.exp(mpmath.mpf(v) ** 2)) for v in x]
    check(kernel("aten::special_erfcx.out", x), want, rtol=1e-13)
    p = np.array([1e-20, 0.01, 0.3, 0.5000001, 0.9, 1 - 1e-12])
    want = [float(-mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * mpmath.mpf(v))) for v in p]
    check(kernel("aten::special_ndtri.out", p), want, rtol=1e-13, atol=1e-15)  # absolute near p = 1/2
