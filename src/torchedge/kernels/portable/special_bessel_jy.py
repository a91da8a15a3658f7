"""Bessel functions J0, J1, Y0, Y1, the spherical j0 and the Airy function Ai of torch.special.

Computed as ATen computes them, in the op's dtype (float32 arithmetic for float32, integer
and bool inputs): rational approximations on ``[0, 5]`` and Hankel's asymptotic form with
rational corrections beyond (the Cephes forms), both evaluated on the whole array and
selected per element. Ai uses its power series on ``[-2.09, 2.09)`` (summed until the term
falls below the dtype's epsilon, per element) and its asymptotic expansions outside.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.portable.special_bessel import horner, special_unary
from torchedge.kernels.registry import register_kernel

__all__ = ["bessel_j0", "bessel_j1"]

# Asymptotic corrections P(25/x²)/Q(25/x²) and Q-terms, shared by J0 and Y0 (P0, Q0) and J1 and Y1 (P1, Q1)
_P0 = (
    (7.96936729297347051624e-4, 8.28352392107440799803e-2, 1.23953371646414299388e0, 5.44725003058768775090e0,
     8.74716500199817011941e0, 5.30324038235394892183e0, 9.99999999999999997821e-1),
    (9.24408810558863637013e-4, 8.56288474354474431428e-2, 1.25352743901058953537e0, 5.47097740330417105182e0,
     8.76190883237069594232e0, 5.30605288235394617618e0, 1.00000000000000000218e0),
)  # fmt: skip
_Q0 = (
    (-1.13663838898469149931e-2, -1.28252718670509318512e0, -1.95539544257735972385e1, -9.32060152123768231369e1,
     -1.77681167980488050595e2, -1.47077505154951170175e2, -5.14105326766599330220e1, -6.05014350600728481186e0),
    (6.43178256118178023184e1, 8.56430025976980587198e2, 3.88240183605401609683e3, 7.24046774195652478189e3,
     5.93072701187316984827e3, 2.06209331660327847417e3, 2.42005740240291393179e2),
)  # fmt: skip
_P1 = (
    (7.62125616208173112003e-4, 7.31397056940917570436e-2, 1.12719608129684925192e0, 5.11207951146807644818e0,
     8.42404590141772420927e0, 5.21451598682361504063e0, 1.00000000000000000254e0),
    (5.71323128072548699714e-4, 6.88455908754495404082e-2, 1.10514232634061696926e0, 5.07386386128601488557e0,
     8.39985554327604159757e0, 5.20982848682361821619e0, 9.99999999999999997461e-1),
)  # fmt: skip
_Q1 = (
    (5.10862594750176621635e-2, 4.98213872951233449420e0, 7.58238284132545283818e1, 3.66779609360150777800e2,
     7.10856304998926107277e2, 5.97489612400613639965e2, 2.11688757100572135698e2, 2.52070205858023719784e1),
    (7.42373277035675149943e1, 1.05644886038262816351e3, 4.98641058337653607651e3, 9.56231892404756170795e3,
     7.99704160447350683650e3, 2.82619278517639096600e3, 3.36093607810698293419e2),
)  # fmt: skip
# rational parts on [0, 5], in x²
_J0_R = (
    (-4.79443220978201773821e9, 1.95617491946556577543e12, -2.49248344360967716204e14, 9.70862251047306323952e15),
    (4.99563147152651017219e2, 1.73785401676374683123e5, 4.84409658339962045305e7, 1.11855537045356834862e10,
     2.11277520115489217587e12, 3.10518229857422583814e14, 3.18121955943204943306e16, 1.71086294081043136091e18),
)  # fmt: skip
_J1_R = (
    (-8.99971225705559398224e8, 4.52228297998194034323e11, -7.27494245221818276015e13, 3.68295732863852883286e15),
    (6.20836478118054335476e2, 2.56987256757748830383e5, 8.35146791431949253037e7, 2.21511595479792499675e10,
     4.74914122079991414898e12, 7.84369607876235854894e14, 8.95222336184627338078e16, 5.32278620332680085395e18),
)  # fmt: skip
_Y0_R = (
    (1.55924367855235737965e4, -1.46639295903971606143e7, 5.43526477051876500413e9, -9.82136065717911466409e11,
     8.75906394395366999549e13, -3.46628303384729719441e15, 4.42733268572569800351e16, -1.84950800436986690637e16),
    (1.04128353664259848412e3, 6.26107330137134956842e5, 2.68919633393814121987e8, 8.64002487103935000337e10,
     2.02979612750105546709e13, 3.17157752842975028269e15, 2.50596256172653059228e17),
)  # fmt: skip
_Y1_R = (
    (1.26320474790178026440e9, -6.47355876379160291031e11, 1.14509511541823727583e14, -8.12770255501325109621e15,
     2.02439475713594898196e17, -7.78877196265950026825e17),
    (5.94301592346128195359e2, 2.35564092943068577943e5, 7.34811944459721705660e7, 1.87601316108706159478e10,
     3.88231277496238566008e12, 6.20557727146953693363e14, 6.87141087355300489866e16, 3.97270608116560655612e18),
)  # fmt: skip
_J0_ROOTS = (5.78318596294678452118e0, 3.04712623436620863991e1)  # squares of J0's first two zeros
_J1_ROOTS = (1.46819706421238932572e1, 4.92184563216946036703e1)
_SQRT_2_PI = 0.797884560802865355879892119868763737  # sqrt(2/pi)
_TWO_PI = 0.636619772367581343075535053490057448  # 2/pi


def _horner_leading_zero(z, coefficients):
    """Horner's rule whose first step is ``0 * z + c0`` (so inf or nan z gives nan), as ATen's loops.
    The denominators have no implicit leading 1 (ATen sums exactly the listed terms)."""
    return horner(z, (0.0, *coefficients))


def _hankel(x, w, p, q, phase: float, second: bool):
    """Hankel's asymptotic form: sqrt(2/(pi x)) (P cos(x - phase) - (5/x) Q sin(x - phase)) for J,
    (P sin + (5/x) Q cos) for Y, with P and Q rational in ``w`` (25/x² as each op forms it)."""
    t = x.dtype.type
    pp = _horner_leading_zero(w, p[0]) / _horner_leading_zero(w, p[1])
    qq = _horner_leading_zero(w, q[0]) / _horner_leading_zero(w, q[1])
    shifted = x - t(phase)
    if second:
        core = pp * np.sin(shifted) + t(5.0) / x * qq * np.cos(shifted)
    else:
        core = pp * np.cos(shifted) - t(5.0) / x * qq * np.sin(shifted)
    return core * t(_SQRT_2_PI) / np.sqrt(x)


def _rational(z, table):
    return _horner_leading_zero(z, table[0]) / _horner_leading_zero(z, table[1])


def bessel_j0(x):
    x = np.abs(x)
    t = x.dtype.type
    z = x * x
    small = (z - t(_J0_ROOTS[0])) * (z - t(_J0_ROOTS[1])) * _horner_leading_zero(z, _J0_R[0])
    small = small / _horner_leading_zero(z, _J0_R[1])
    small = np.where(x < t(0.00001), t(1.0) - z / t(4.0), small)
    return np.where(x <= 5, small, _hankel(x, t(25.0) / z, _P0, _Q0, math.pi / 4, second=False))


def bessel_j1(x):
    sign = x < 0
    x = np.where(sign, -x, x)
    t = x.dtype.type
    z = x * x
    small = _rational(z, _J1_R) * x * (z - t(_J1_ROOTS[0])) * (z - t(_J1_ROOTS[1]))
    w = t(5.0) / x * (t(5.0) / x)
    result = np.where(x <= 5, small, _hankel(x, w, _P1, _Q1, 3 * math.pi / 4, second=False))
    return np.where(sign, -result, result)


def _y_edges(x, result):
    """Y0 and Y1 are -inf at 0 and nan for negative x."""
    result = np.where(x == 0, x.dtype.type(-np.inf), result)
    return np.where(x < 0, x.dtype.type(np.nan), result)


def _bessel_y0(x):
    t = x.dtype.type
    z = x * x
    small = _rational(z, _Y0_R) + t(_TWO_PI) * np.log(x) * bessel_j0(x)
    large = _hankel(x, t(25.0) / z, _P0, _Q0, math.pi / 4, second=True)
    return _y_edges(x, np.where(x <= 5, small, large))


def _bessel_y1(x):
    t = x.dtype.type
    z = x * x
    small = x * _rational(z, _Y1_R) + t(_TWO_PI) * (bessel_j1(x) * np.log(x) - t(1.0) / x)
    w = t(5.0) / x * (t(5.0) / x)
    large = _hankel(x, w, _P1, _Q1, 3 * math.pi / 4, second=True)
    return _y_edges(x, np.where(x <= 5, small, large))


def _spherical_j0(x):
    t = x.dtype.type
    z = x * x
    series = t(1.0) + z * _horner_leading_zero(z, [(-1) ** k / math.factorial(2 * k + 1) for k in range(6, 0, -1)])
    result = np.where(np.abs(x) < t(0.5), series, np.sin(x) / x)
    return np.where(np.isinf(x), t(0.0), result)


# Ai: the auxiliary functions of its asymptotic expansions (numerator, denominator; highest power first)
_AI_A = (
    (3.46538101525629032477e-1, 1.20075952739645805542e1, 7.62796053615234516538e1, 1.68089224934630576269e2,
     1.59756391350164413639e2, 7.05360906840444183113e1, 1.40264691163389668864e1, 9.99999999999999995305e-1),
    (5.67594532638770212846e-1, 1.47562562584847203173e1, 8.45138970141474626562e1, 1.77318088145400459522e2,
     1.64234692871529701831e2, 7.14778400825575695274e1, 1.40959135607834029598e1, 1.00000000000000000470e0),
)  # fmt: skip
_AI_F = (
    (-1.31696323418331795333e-1, -6.26456544431912369773e-1, -6.93158036036933542233e-1, -2.79779981545119124951e-1,
     -4.91900132609500318020e-2, -4.06265923594885404393e-3, -1.59276496239262096340e-4, -2.77649108155232920844e-6,
     -1.67787698489114633780e-8),
    (1.33560420706553243746e1, 3.26825032795224613948e1, 2.67367040941499554804e1, 9.18707402907259625840e0,
     1.47529146771666414581e0, 1.15687173795188044134e-1, 4.40291641615211203805e-3, 7.54720348287414296618e-5,
     4.51850092970580378464e-7),
)  # fmt: skip
_AI_G = (
    (1.97339932091685679179e-2, 3.91103029615688277255e-1, 1.06579897599595591108e0, 9.39169229816650230044e-1,
     3.51465656105547619242e-1, 6.33888919628925490927e-2, 5.85804113048388458567e-3, 2.82851600836737019778e-4,
     6.98793669997260967291e-6, 8.11789239554389293311e-8, 3.41551784765923618484e-10),
    (9.30892908077441974853e0, 1.98352928718312140417e1, 1.55646628932864612953e1, 5.47686069422975497931e0,
     9.54293611618961883998e-1, 8.64580826352392193095e-2, 4.12656523824222607191e-3, 1.01259085116509135510e-4,
     1.17166733214413521882e-6, 4.91834570062930015649e-9),
)  # fmt: skip
_INV_SQRT_PI = 5.64189583547756286948e-1  # 1/sqrt(pi)
_AI_0, _AI_PRIME_0 = 0.355028053887817239260, 0.258819403792806798405  # Ai(0), -Ai'(0)


def _airy_series(x):
    """Ai's Maclaurin series f(x) Ai(0) + g(x) Ai'(0), summed per element until the term of f
    falls below epsilon relative to f."""
    t = x.dtype.type
    eps = np.finfo(x.dtype).eps
    f, g, m, n, k = np.ones_like(x), x.copy(), np.ones_like(x), x.copy(), np.ones_like(x)
    z = x * x * x
    running = np.ones(x.shape, bool)
    while running.any():
        m2 = m * z
        k2 = k + t(1.0)
        m2 = m2 / k2
        n2 = n * z
        k2 = k2 + t(1.0)
        n2 = n2 / k2
        m2 = m2 / k2
        f2 = f + m2
        k2 = k2 + t(1.0)
        n2 = n2 / k2
        g2 = g + n2
        for old, new in ((f, f2), (g, g2), (m, m2), (n, n2), (k, k2)):
            np.copyto(old, new, where=running)
        running &= np.abs(m / f) > eps
    return t(_AI_0) * f - t(_AI_PRIME_0) * g


def _airy_ai(x):
    t = x.dtype.type
    root = np.sqrt(np.abs(x))
    # x < -2.09: oscillating expansion in z = 1 / zeta, zeta = (2/3) |x|^(3/2)
    z = t(1.0) / (t(-2.0) * x * root / t(3.0))
    zz = z * z
    ratio_f = _horner_leading_zero(zz, _AI_F[0]) / _horner_leading_zero(zz, _AI_F[1])
    ratio_g = _horner_leading_zero(zz, _AI_G[0]) / _horner_leading_zero(zz, _AI_G[1])
    phase = t(-2.0) * x * root / t(3.0) + t(0.25) * t(math.pi)
    negative = (
        t(_INV_SQRT_PI) / np.sqrt(root) * (np.sin(phase) * (t(1.0) + zz * ratio_f) - np.cos(phase) * (z * ratio_g))
    )
    # x >= 2.09: decaying expansion in 1 / zeta
    zeta = t(2.0) * x * root / t(3.0)
    inv = t(1.0) / zeta
    ratio = _horner_leading_zero(inv, _AI_A[0]) / _horner_leading_zero(inv, _AI_A[1])
    positive = t(_INV_SQRT_PI) * ratio / (t(2.0) * np.sqrt(root) * np.exp(zeta))
    middle = (x >= t(-2.09)) & (x < t(2.09))
    series = np.full_like(x, np.nan)
    series[middle] = _airy_series(x[middle])
    result = np.where(x < t(-2.09), negative, np.where(x >= t(2.09), positive, series))
    result = np.where(np.isnan(x) | middle, series, result)
    result = np.where(x > t(103.892), t(0.0), result)
    return np.where(np.isinf(x), t(np.nan), result)


_OPS = [
    ("aten::special_bessel_j0.out", bessel_j0),
    ("aten::special_bessel_j1.out", bessel_j1),
    ("aten::special_bessel_y0.out", _bessel_y0),
    ("aten::special_bessel_y1.out", _bessel_y1),
    ("aten::special_spherical_bessel_j0.out", _spherical_j0),
    ("aten::special_airy_ai.out", _airy_ai),
]

for _op, _fn in _OPS:
    register_kernel(_op, shape=broadcast_inputs)(special_unary(_op, _fn))
