"""Modified Bessel functions of torch.special: ``i0``, ``i0e``, ``i1``, ``i1e``, ``I0``, ``I1``, ``K0``,
``K1`` and the exponentially scaled ``K0``, ``K1``.

Each is computed as ATen computes it, in the op's dtype (float32 arithmetic for float32, so
that overflow and rounding follow ATen's float kernels): the Cephes Chebyshev expansions on
``[0, 8]`` and ``(8, inf)`` (``[0, 2]`` and ``(2, inf)`` for K), both branches evaluated on the
whole array and selected per element. Integer and bool inputs compute in float32; ``i0``,
``i0e``, ``i1`` and ``i1e`` also take float16 and bfloat16 (computed in float32, rounded once).
`special_unary` builds the kernels (the Bessel functions of `special_bessel_jy` use it too).
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, float_result_type, is_floating
from torchedge.kernels.portable.common import fail, quiet
from torchedge.kernels.portable.elementwise import FAST_FLOATS, check_out, store
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.registry import register_kernel

__all__ = ["special_unary", "chebyshev_series", "horner", "modified_i0", "modified_i1"]


def chebyshev_series(y: np.ndarray, coefficients) -> np.ndarray:
    """Clenshaw's sum of a Chebyshev series (Cephes' ``chbevl`` form, highest term first) in y's dtype."""
    table = np.asarray(coefficients, np.float64).astype(y.dtype)
    b0 = np.full_like(y, table[0])
    b1 = np.zeros_like(y)
    b2 = b1
    for c in table[1:]:
        b2, b1 = b1, b0
        b0 = y * b1 - b2 + c
    return (b0 - b2) * y.dtype.type(0.5)


def horner(z: np.ndarray, coefficients) -> np.ndarray:
    """A polynomial in z, coefficients highest power first, in z's dtype."""
    table = np.asarray(coefficients, np.float64).astype(z.dtype)
    result = np.full_like(z, table[0])
    for c in table[1:]:
        result = result * z + c
    return result


def special_unary(op: str, fn, halves: bool = False):
    """The kernel of a one-input float op computed by ``fn(x)`` on a flat array of the op's dtype
    (float32 for integer and bool inputs; with ``halves``, float16 and bfloat16 compute in float32)."""

    def kernel(self, out):
        dtype = float_result_type(self)
        if dtype not in FAST_FLOATS and not (halves and is_floating(dtype) and dtype.itemsize == 2):
            fail(op, f"is not implemented for dtype {dtype}")
        check_out(op, dtype, out)
        work = accumulate_dtype(dtype)
        x = np.asarray(self).astype(work).reshape(-1)
        with quiet():
            result = fn(x).reshape(np.shape(self))
        store(out, result, dtype)

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


# exp(-x) I0(x) on [0, 8] in y = x/2 - 2; exp(-x) sqrt(x) I0(x) on (8, inf) in y = 32/x - 2
_I0_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)  # fmt: skip
_I0_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)  # fmt: skip
# exp(-x) I1(x) / x on [0, 8]; exp(-x) sqrt(x) I1(x) on (8, inf)
_I1_A = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
    -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
    4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
    -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
    -1.76416518357834055153e-1, 2.52587186443633654823e-1,
)  # fmt: skip
_I1_B = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
    -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)  # fmt: skip
# K0(x) + log(x/2) I0(x) on [0, 2] in y = x² - 2; exp(x) sqrt(x) K0(x) on (2, inf) in y = 8/x - 2
_K0_A = (
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-9, 2.53479107902614945675e-7, 2.28621210311945178607e-5,
    1.26461541144692592338e-3, 3.59799365153615016266e-2, 3.44289899924628486886e-1,
    -5.35327393233902768720e-1,
)  # fmt: skip
_K0_B = (
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
    6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-9, 8.57403401741422608519e-9, -4.66048989768794782956e-8,
    2.76681363944501510342e-7, -1.83175552271911948767e-6, 1.39498137188764993662e-5,
    -1.28495495816278026384e-4, 1.56988388573005337491e-3, -3.14481013119645005427e-2,
    2.44030308206595545468e0,
)  # fmt: skip
# x (K1(x) - log(x/2) I1(x)) on [0, 2]; exp(x) sqrt(x) K1(x) on (2, inf)
_K1_A = (
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-8, -2.43340614156596823496e-6,
    -1.73028895751305206302e-4, -6.97572385963986435018e-3, -1.22611180822657148235e-1,
    -3.53155960776544875667e-1, 1.52530022733894777053e0,
)  # fmt: skip
_K1_B = (
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
    1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
    3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
    2.01504975519703286596e-9, -1.03457624656780970260e-8, 5.74108412545004946722e-8,
    -3.50196060308781257119e-7, 2.40648494783721712015e-6, -1.93619797416608296024e-5,
    1.95215518471351631108e-4, -2.85781685962277938680e-3, 1.03923736576817238437e-1,
    2.72062619048444266945e0,
)  # fmt: skip


def _i_series(x: np.ndarray, a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """|x|, and the two scaled series of I0 or I1: on [0, 8] and on (8, inf)."""
    ax = np.abs(x)
    near = chebyshev_series(ax / 2 - 2, a)
    far = chebyshev_series(32 / ax - 2, b)
    return ax, near, far


def _tables_i1(dtype) -> tuple:
    # ATen's float32 i1 and i1e drop the terms below float32's precision
    return (_I1_A[12:], _I1_B[18:]) if dtype == np.float32 else (_I1_A, _I1_B)


def _i0(x):
    ax, near, far = _i_series(x, _I0_A, _I0_B)
    e = np.exp(ax)
    return np.where(ax <= 8, e * near, e * far / np.sqrt(ax))


def _i0e(x):
    ax, near, far = _i_series(x, _I0_A, _I0_B)
    return np.where(ax <= 8, near, far / np.sqrt(ax))


def _i1(x):
    ax, near, far = _i_series(x, *_tables_i1(x.dtype))
    e = np.exp(ax)
    result = np.where(ax <= 8, e * ax * near, e * far / np.sqrt(ax))
    return np.where(x < 0, -result, result)


def _i1e(x):
    ax, near, far = _i_series(x, *_tables_i1(x.dtype))
    result = np.where(ax <= 8, near * ax, far / np.sqrt(ax))
    return np.where(x < 0, -result, result)


def modified_i0(x):
    """I0 as ATen's ``modified_bessel_i0`` computes it (the full tables in every dtype)."""
    ax, near, far = _i_series(x, _I0_A, _I0_B)
    e = np.exp(ax)
    return np.where(ax <= 8, e * near, e * far / np.sqrt(ax))


def modified_i1(x):
    """I1 as ATen's ``modified_bessel_i1`` computes it (the full tables in every dtype)."""
    ax, near, far = _i_series(x, _I1_A, _I1_B)
    e = np.exp(ax)
    result = np.where(ax <= 8, near * ax * e, e * far / np.sqrt(ax))
    return np.where(x < 0, -result, result)


def _k_parts(x, a, b):
    """The series of K0 or K1 on [0, 2] and on (2, inf) (scaled by exp(x) sqrt(x))."""
    return chebyshev_series(x * x - 2, a), chebyshev_series(8 / x - 2, b)


def _k_edges(x, result):
    """K and its scaled form are inf at 0 and nan for negative x."""
    result = np.where(x == 0, x.dtype.type(np.inf), result)
    return np.where(x < 0, x.dtype.type(np.nan), result)


def _log_half(x):
    # ATen's K0 takes log(0.5 * x) in double precision whatever the dtype
    return np.log(x.astype(np.float64) * 0.5)


def _k0(x):
    near, far = _k_parts(x, _K0_A, _K0_B)
    small = (near - _log_half(x) * modified_i0(x)).astype(x.dtype)
    return _k_edges(x, np.where(x <= 2, small, np.exp(-x) * far / np.sqrt(x)))


def _k1(x):
    near, far = _k_parts(x, _K1_A, _K1_B)
    small = np.log(x * x.dtype.type(0.5)) * modified_i1(x) + near / x
    return _k_edges(x, np.where(x <= 2, small, np.exp(-x) * far / np.sqrt(x)))


def _scaled_k0(x):
    near, far = _k_parts(x, _K0_A, _K0_B)
    small = (near - np.log(x * x.dtype.type(0.5)) * modified_i0(x)) * np.exp(x)
    return _k_edges(x, np.where(x <= 2, small, far / np.sqrt(x)))


def _scaled_k1(x):
    near, far = _k_parts(x, _K1_A, _K1_B)
    small = (np.log(x * x.dtype.type(0.5)) * modified_i1(x) + near / x) * np.exp(x)
    return _k_edges(x, np.where(x <= 2, small, far / np.sqrt(x)))


_OPS = [
    ("aten::i0.out", _i0, True),
    ("aten::special_i0e.out", _i0e, True),
    ("aten::special_i1.out", _i1, True),
    ("aten::special_i1e.out", _i1e, True),
    ("aten::special_modified_bessel_i0.out", modified_i0, False),
    ("aten::special_modified_bessel_i1.out", modified_i1, False),
    ("aten::special_modified_bessel_k0.out", _k0, False),
    ("aten::special_modified_bessel_k1.out", _k1, False),
    ("aten::special_scaled_modified_bessel_k0.out", _scaled_k0, False),
    ("aten::special_scaled_modified_bessel_k1.out", _scaled_k1, False),
]

for _op, _fn, _halves in _OPS:
    register_kernel(_op, shape=broadcast_inputs)(special_unary(_op, _fn, _halves))
