"""The optimized upsampling, adaptive average pooling, clamping and pow against the portable
reference, without torch.

Each strategy is forced through its tuned constant and checked taken by a spy: interpolation
and adaptive averages (and their gradients) by one product with a small dense matrix, or the
portable gathers, ``reduceat`` and range sums; clamps against constant rows or against numbers;
pow by repeated products or NumPy's pow. The matrices hold the reference's weights, so floats
agree within a bound on reassociation (`oracle.assert_reassociated`, the bound computed by the
reference over absolute values and absolute weights); clamps give the reference's values; a
product power of n factors is within n rounding errors of pow.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.kernels.oracle import NP_BF16, assert_reassociated
from torchedge.kernels import registry
from torchedge.kernels.optimized import clamp_rows, small_matrices
from torchedge.kernels.portable import bounds
from torchedge.kernels.portable.upsample import interpolate_by_gathers

FLOATS = [np.float32, np.float64, np.float16]
MATRIX = {"upsample_matrix_size": 1 << 30, "adaptive_matrix_ratio": 1 << 30}
NO_MATRIX = {"upsample_matrix_size": 0, "adaptive_matrix_ratio": 0}


@pytest.fixture
def products(monkeypatch):
    """The dims the optimized kernels multiply by a matrix (a spy on `matmul_along`)."""
    called: list[int] = []
    real = small_matrices.matmul_along

    def spy(x, matrix, axis):
        called.append(axis)
        return real(x, matrix, axis)

    monkeypatch.setattr(small_matrices, "matmul_along", spy)
    return called


def _array(shape, dtype, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(dtype)


def _run(op, args, dtype, library=None, **options):
    shape = registry.output_shapes(op, [*args, None])[0]
    out = np.full(shape, 7, dtype)
    kernel = registry.get_kernel(op) if library is None else registry.get_kernel(op, library=library)
    kernel.fn(*args, out, **options)
    return out


def _abs_gathers(x, indices, weights, axis):
    return interpolate_by_gathers(x, indices, [np.abs(w) for w in weights], axis)


# op, input shape, arguments after the input, taps per dim
UPSAMPLE = [
    ("aten::upsample_linear1d.out", (2, 3, 9), [[20], False, None], 2),
    ("aten::upsample_linear1d.out", (2, 3, 20), [[7], True, None], 2),
    ("aten::upsample_bilinear2d.out", (1, 3, 6, 9), [[13, 4], False, None, None], 2),
    ("aten::upsample_bilinear2d.out", (2, 2, 7, 5), [[14, 10], True, 2.0, 2.0], 2),
    ("aten::upsample_bilinear2d.vec_out", (1, 2, 5, 6), [None, False, [2.5, 1.5]], 2),
    ("aten::upsample_trilinear3d.out", (1, 2, 3, 4, 5), [[6, 3, 9], False, None, None, None], 2),
    ("aten::upsample_bicubic2d.out", (1, 3, 6, 7), [[12, 5], False, None, None], 4),
    ("aten::upsample_bicubic2d.out", (2, 1, 5, 8), [[9, 16], True, None, None], 4),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", UPSAMPLE, ids=[f"{s[0].split('::')[1]}-{i}" for i, s in enumerate(UPSAMPLE)])
@pytest.mark.parametrize("branch", ["matrix", "gathers"])
def test_interpolating_upsample_matches_the_reference(products, forced, branch, spec, dtype):
    forced(MATRIX if branch == "matrix" else NO_MATRIX)
    op, shape, arguments, taps = spec
    x = _array(shape, dtype)
    got = _run(op, [x, *arguments], dtype)
    want = _run(op, [x, *arguments], dtype, library="portable")
    bound = _run(op, [np.abs(x.astype(np.float64)), *arguments], np.float64, "portable", interpolate=_abs_gathers)
    resized = len(shape) - 2
    assert_reassociated(got, want, bound, taps * resized)
    assert len(products) == (resized if branch == "matrix" else 0)


# op, input shape, output size
ADAPTIVE = [
    ("aten::adaptive_avg_pool1d.out", (2, 3, 11), [4]),
    ("aten::_adaptive_avg_pool2d.out", (2, 3, 9, 10), [4, 3]),
    ("aten::_adaptive_avg_pool2d.out", (1, 2, 5, 4), [7, 9]),  # more windows than inputs
    ("aten::_adaptive_avg_pool2d.out", (3, 8, 8), [1, 1]),  # unbatched, global
    ("aten::_adaptive_avg_pool3d.out", (1, 2, 6, 7, 5), [3, 2, 4]),
]


def _depth(shape, size) -> int:
    """The longest adaptive window: the most terms any output sums."""
    return math.prod(-(-n // m) + 1 for n, m in zip(shape[-len(size) :], size))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", ADAPTIVE, ids=[str(i) for i in range(len(ADAPTIVE))])
@pytest.mark.parametrize("branch", ["matrix", "reduceat"])
def test_adaptive_avg_pool_matches_the_reference(products, forced, branch, spec, dtype):
    forced(MATRIX if branch == "matrix" else NO_MATRIX)
    op, shape, size = spec
    x = _array(shape, dtype)
    got = _run(op, [x, size], dtype)
    want = _run(op, [x, size], dtype, library="portable")
    bound = _run(op, [np.abs(x.astype(np.float64)), size], np.float64, "portable")
    assert_reassociated(got, want, bound, _depth(shape, size))
    assert bool(products) == (branch == "matrix")


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", ADAPTIVE[1:], ids=[str(i) for i in range(1, len(ADAPTIVE))])
@pytest.mark.parametrize("branch", ["matrix", "range-sums"])
def test_adaptive_avg_pool_backward_matches_the_reference(products, forced, branch, spec, dtype):
    forced(MATRIX if branch == "matrix" else NO_MATRIX)
    op, shape, size = spec
    op = op.replace(".out", "_backward.out")
    x = _array(shape, dtype)
    grad = _array(shape[: len(shape) - len(size)] + tuple(size), dtype, seed=1)
    got = _run(op, [grad, x], dtype)
    want = _run(op, [grad, x], dtype, library="portable")
    bound = _run(op, [np.abs(grad.astype(np.float64)), x.astype(np.float64)], np.float64, "portable")
    assert_reassociated(got, want, bound, _depth(size, shape[-len(size) :]) + _depth(shape, size))
    assert bool(products) == (branch == "matrix")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("low, high", [(-1.5, 2.0), (0.0, None), (None, -0.0), (3.0, 1.0)])
@pytest.mark.parametrize("in_place", [False, True], ids=["apart", "in-place"])
@pytest.mark.parametrize("branch", ["rows", "numbers"])
def test_clamp_by_rows_gives_the_reference_values(forced, monkeypatch, branch, in_place, low, high, dtype):
    """Where NumPy's clip does not keep ties (forced), blocks of 7 against constant rows give
    the values of the portable number-operand clamp, nan and infinities included."""
    monkeypatch.setattr(bounds, "clip_keeps_ties", lambda dtype: False)
    forced({"clamp_rows_block": 7, "clamp_rows_min_elements": 0 if branch == "rows" else 1 << 30})
    x = _array((5, 9), dtype) * 3
    x.reshape(-1)[[2, 20, 33]] = [np.nan, np.inf, -np.inf]
    want = np.empty_like(x)
    bounds.clamp_by_numbers(x, low, high, want)
    out = x if in_place else np.full_like(x, 7)
    assert clamp_rows.clamp_into(x, low, high, out) == (branch == "rows")
    if branch == "numbers":
        clamp_rows.clamp_by_numbers(x, low, high, out)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, NP_BF16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("exponent", [4, 5, 6, 7, 8, 8.0])
@pytest.mark.parametrize("branch", ["products", "pow"])
def test_pow_by_products_is_within_its_roundings_of_the_reference(forced, branch, exponent, dtype):
    """n factors multiplied in binary powering round at most n - 1 times (each a relative eps;
    pow rounds once more), so the two are within n eps of each other, plus the smallest
    normal for results that underflow. Forcing the limit to 3 gives the reference's bits."""
    forced({"pow_product_max_exponent": 8 if branch == "products" else 3})
    x = np.random.default_rng(int(exponent)).uniform(-3, 3, 500).astype(dtype)
    op = "aten::pow.Tensor_Scalar_out"
    got = _run(op, [x, exponent], dtype)
    want = _run(op, [x, exponent], dtype, library="portable")
    if branch == "pow":
        assert got.tobytes() == want.tobytes()
        return
    info = np.finfo(np.float32 if dtype == NP_BF16 else dtype)
    eps = 2.0**-7 if dtype == NP_BF16 else float(info.eps)
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.all(np.abs(g - w) <= exponent * eps * np.abs(w) + float(info.smallest_normal))
