"""Factorization kernels against eager: cholesky_ex, qr, svd, eigh, pinv, matrix_exp, householder_product.

Singular vectors and eigenvectors are unique only up to sign and eager's LAPACK picks signs
NumPy's does not reproduce, so for them these tests check the kernels' documented convention
(largest-magnitude entry of each column positive), agreement with eager up to that sign, and the
reconstruction; every other output is compared with eager directly.
"""

import numpy as np
import pytest
import torch

from tests.kernels.harness import TOLERANCES
from tests.kernels.linalg_helpers import call, check_op, randn, spd
from torchedge.errors import KernelError
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel

FLOATS = [torch.float32, torch.float64]
RECT = [(4, 4), (5, 3), (3, 5), (2, 6, 4), (2, 1, 3, 3), (1, 1), (0, 3), (3, 0), (0, 2, 2)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (1, 1), (0, 0), (2, 0, 0)])
def test_cholesky_ex_matches_eager(dtype, upper, shape):
    a = spd(shape, dtype)
    check_op("aten::linalg_cholesky_ex.L", [to_numpy(a), upper, False], torch.linalg.cholesky_ex(a, upper=upper))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_of_non_positive_definite_inputs_matches_eager(dtype, upper):
    a = torch.tensor(
        [
            [[4.0, 2.0, 1.0], [2.0, 1.0, 0.0], [1.0, 0.0, 5.0]],
            [[4.0, 2.0, 1.0], [2.0, 2.0, 0.0], [1.0, 0.0, -5.0]],
            torch.eye(3).tolist(),
        ],
        dtype=dtype,
    )
    check_op("aten::linalg_cholesky_ex.L", [to_numpy(a), upper, False], torch.linalg.cholesky_ex(a, upper=upper))
    with pytest.raises(KernelError, match=r"\(batch element 0\).*order 2"):
        call("aten::linalg_cholesky_ex.L", [to_numpy(a), upper, True], torch.linalg.cholesky_ex(a))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", RECT)
def test_qr_matches_eager(dtype, mode, shape):
    a = randn(shape, dtype)
    check_op("aten::linalg_qr.out", [to_numpy(a), mode], torch.linalg.qr(a, mode=mode))


def test_qr_refuses_an_unknown_mode():
    with pytest.raises(RuntimeError):
        torch.linalg.qr(torch.eye(2), mode="x")
    with pytest.raises(KernelError, match="unrecognized mode 'x'"):
        get_kernel("aten::linalg_qr.out").fn(np.eye(2), "x", np.empty(0), np.empty((2, 2)))


def _assert_same_up_to_column_signs(got: np.ndarray, want: torch.Tensor) -> np.ndarray:
    """Compare columns up to sign; return the signs that map eager's columns onto ours."""
    want = want.numpy()
    signs = np.where(np.sum(got * want, axis=-2, keepdims=True) < 0, -1.0, 1.0).astype(want.dtype)
    rtol, atol = TOLERANCES[np.dtype(want.dtype)]
    np.testing.assert_allclose(got, want * signs, rtol=rtol * 10, atol=atol * 10)
    return signs


def _assert_largest_entries_positive(vectors: np.ndarray) -> None:
    if vectors.size:
        top = np.argmax(np.abs(vectors), axis=-2)[..., None, :]
        assert np.all(np.take_along_axis(vectors, top, axis=-2) >= 0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("shape", RECT)
def test_svd_matches_eager_up_to_signs(dtype, full_matrices, shape):
    a = randn(shape, dtype)
    expected = torch.ops.aten._linalg_svd(a, full_matrices)
    u, s, vh = check_op("aten::_linalg_svd.U", [to_numpy(a), full_matrices, True, None], expected, skip=(0, 2))
    k = min(shape[-2:])
    _assert_largest_entries_positive(u)
    if min(shape[-2:]) > 0:
        signs = _assert_same_up_to_column_signs(u[..., :, :k], expected[0][..., :, :k])
        _assert_same_up_to_column_signs(np.swapaxes(vh[..., :k, :], -1, -2), expected[2][..., :k, :].mT)
        np.testing.assert_allclose(
            signs, np.sign(np.sum(vh[..., :k, :] * expected[2][..., :k, :].numpy(), axis=-1))[..., None, :]
        )
    rtol, atol = TOLERANCES[np.dtype(to_numpy(a).dtype)]
    np.testing.assert_allclose(
        (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], to_numpy(a), rtol=rtol * 10, atol=atol * 10
    )
    if full_matrices:  # the extra columns complete orthonormal bases
        np.testing.assert_allclose(
            np.swapaxes(u, -1, -2) @ u, np.broadcast_to(np.eye(u.shape[-1]), u.shape), atol=atol * 10
        )
        np.testing.assert_allclose(
            vh @ np.swapaxes(vh, -1, -2), np.broadcast_to(np.eye(vh.shape[-1]), vh.shape), atol=atol * 10
        )


@pytest.mark.parametrize("dtype", FLOATS)
def test_svd_values_only_match_eager(dtype):
    a = randn((2, 5, 3), dtype)
    check_op("aten::_linalg_svd.U", [to_numpy(a), False, False, None], torch.ops.aten._linalg_svd(a, False, False))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5), (1, 1), (0, 0), (3, 0, 0)])
def test_eigh_matches_eager_up_to_signs(dtype, uplo, shape):
    a = randn(shape, dtype)
    a = a + a.mT
    a = a.tril() if uplo == "L" else a.triu()  # only the named triangle may be read
    expected = torch.ops.aten._linalg_eigh(a, uplo)
    w, v = check_op("aten::_linalg_eigh.eigenvalues", [to_numpy(a), uplo, True], expected, skip=(1,))
    _assert_largest_entries_positive(v)
    if v.size:
        _assert_same_up_to_column_signs(v, expected[1])
    values_only = torch.ops.aten._linalg_eigh(a, uplo, False)
    check_op("aten::_linalg_eigh.eigenvalues", [to_numpy(a), uplo, False], values_only)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 2), (0, 3), (2, 0, 0)])
def test_pinv_matches_eager(dtype, shape):
    a = randn(shape, dtype)
    check_op("aten::linalg_pinv.atol_rtol_tensor_out", [to_numpy(a), None, None, False], torch.linalg.pinv(a))
    check_op("aten::linalg_pinv.atol_rtol_float_out", [to_numpy(a), None, None, False], torch.linalg.pinv(a))


def _with_spectrum(values: list, dtype: torch.dtype, symmetric: bool = False) -> torch.Tensor:
    """Batched matrices with the given singular values (eigenvalues when ``symmetric``), clear gaps."""
    n = len(values[0])
    q1 = torch.linalg.qr(randn((len(values), n, n), torch.float64, seed=7)).Q
    q2 = q1 if symmetric else torch.linalg.qr(randn((len(values), n, n), torch.float64, seed=8)).Q
    return ((q1 * torch.tensor(values, dtype=torch.float64)[:, None, :]) @ q2.mT).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_pinv_tolerances_and_hermitian_match_eager(dtype):
    a = _with_spectrum([[4.0, 1.0, 0.4, 0.0], [3.0, 2.0, 0.3, 0.1]], dtype)
    atol, rtol = torch.tensor([0.5, 0.0], dtype=dtype), torch.tensor(0.3, dtype=dtype)
    for kwargs in [{}, {"atol": atol}, {"rtol": rtol}, {"atol": atol, "rtol": rtol}]:
        args = [to_numpy(kwargs[k]) if k in kwargs else None for k in ("atol", "rtol")]
        check_op("aten::linalg_pinv.atol_rtol_tensor_out", [to_numpy(a), *args, False], torch.linalg.pinv(a, **kwargs))
    sym = _with_spectrum([[3.0, -1.0, 0.5, 0.0], [-2.0, 1.0, 0.25, 0.5]], dtype, symmetric=True)
    check_op(
        "aten::linalg_pinv.atol_rtol_tensor_out",
        [to_numpy(sym), None, None, True],
        torch.linalg.pinv(sym, hermitian=True),
    )
    zeros = torch.zeros(3, 2, dtype=dtype)
    check_op(
        "aten::linalg_pinv.atol_rtol_float_out", [to_numpy(zeros), 0.1, None, False], torch.linalg.pinv(zeros, atol=0.1)
    )


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("scale", [0.0, 0.01, 0.1, 1.0, 3.0])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (1, 1), (0, 0)])
def test_matrix_exp_matches_eager(dtype, scale, shape):
    """Against eager in float64, rounded: eager's own float32 kernel is less accurate (next test)."""
    a = randn(shape, dtype) * scale
    expected = torch.linalg.matrix_exp(a.double()).to(dtype)
    check_op("aten::linalg_matrix_exp.out", [to_numpy(a)], expected)


def test_matrix_exp_float32_is_within_eager_float32_error():
    a = torch.diag(torch.tensor([0.5, 0.25]))
    got = call("aten::linalg_matrix_exp.out", [to_numpy(a)], torch.linalg.matrix_exp(a))[0]
    exact = np.exp(np.array([0.5, 0.25]))
    np.testing.assert_allclose(np.diagonal(got), exact, rtol=1.3e-6)
    np.testing.assert_allclose(got, torch.linalg.matrix_exp(a).numpy(), rtol=5e-5)  # eager: 1.9e-5 off


def test_matrix_exp_of_non_finite_inputs_is_nan():
    a = torch.tensor([[[1.0, float("nan")], [0.0, 1.0]], [[0.5, 0.0], [0.0, 0.25]]], dtype=torch.float64)
    out = call("aten::linalg_matrix_exp.out", [to_numpy(a)], torch.linalg.matrix_exp(a))[0]
    assert np.isnan(out[0]).all() and torch.linalg.matrix_exp(a[0]).isnan().any()
    np.testing.assert_allclose(out[1], torch.linalg.matrix_exp(a[1]).numpy(), rtol=1e-7)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(("shape", "k"), [((5, 3), 2), ((2, 4, 4), 4), ((3, 3), 0), ((2, 6, 2), 1), ((0, 0), 0)])
def test_householder_product_matches_eager(dtype, shape, k):
    a, tau = randn(shape, dtype), randn(shape[:-2] + (k,), dtype, seed=6)
    check_op(
        "aten::linalg_householder_product.out", [to_numpy(a), to_numpy(tau)], torch.linalg.householder_product(a, tau)
    )


def test_geqrf_reflectors_give_back_q():
    a = randn((5, 3), torch.float64)
    reflectors, tau = torch.geqrf(a)
    q = call("aten::linalg_householder_product.out", [to_numpy(reflectors), to_numpy(tau)], torch.linalg.qr(a).Q)[0]
    np.testing.assert_allclose(q, torch.linalg.qr(a).Q.numpy(), rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("aten::linalg_householder_product.out", [np.ones((3, 4)), np.ones(2)]),
        ("aten::linalg_householder_product.out", [np.ones((4, 3)), np.ones(4)]),
        ("aten::linalg_householder_product.out", [np.ones((2, 4, 3)), np.ones((3, 2))]),
        ("aten::_linalg_eigh.eigenvalues", [np.eye(3), "X", True]),
        ("aten::_linalg_svd.U", [np.eye(3, dtype=np.int64), False, True, None]),
        ("aten::linalg_matrix_exp.out", [np.ones((2, 3))]),
        ("aten::linalg_cholesky_ex.L", [np.eye(3, dtype=np.int32), False, False]),
    ],
)
def test_factorizations_refuse_bad_inputs(op, args):
    kernel = get_kernel(op)
    with pytest.raises(KernelError, match=op.replace(".", r"\.")):
        kernel.fn(*args, *[np.empty(1)] * (kernel.num_args - len(args)))
