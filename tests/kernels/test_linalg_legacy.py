"""cholesky, cholesky_solve, cholesky_inverse, triangular_solve, lu_unpack, geqrf and ormqr
against eager (float32/float64, batched, flags), their errors, and one program end to end."""

import numpy as np
import pytest
import torch

from tests.kernels.linalg_helpers import call, check_op, randn, spd, well_conditioned
from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.runtime import Runtime

FLOATS = [torch.float32, torch.float64]
SQUARE = [(4, 4), (2, 3, 3), (2, 1, 5, 5), (1, 1), (0, 0), (0, 3, 3)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_inverse_match_eager(dtype, shape, upper):
    a = spd(shape, dtype)
    factor = check_op("aten::cholesky.out", [to_numpy(a), upper], torch.cholesky(a, upper=upper))[0]
    f = torch.from_numpy(factor)
    check_op("aten::cholesky_inverse.out", [factor, upper], torch.cholesky_inverse(f, upper=upper), scale=10)


@pytest.mark.parametrize("dtype", FLOATS)
def test_cholesky_refuses_what_eager_refuses(dtype):
    a = torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=dtype)
    with pytest.raises(RuntimeError, match="positive-definite"):
        torch.cholesky(a)
    with pytest.raises(KernelError, match="aten::cholesky.out.*positive-definite"):
        call("aten::cholesky.out", [to_numpy(a), False], torch.empty(2, 2, dtype=dtype))
    with pytest.raises(KernelError, match="square"):
        call("aten::cholesky.out", [np.ones((2, 3), np.float32), False], torch.empty(2, 3))
    with pytest.raises(KernelError, match="float32 or float64"):
        call("aten::cholesky.out", [np.eye(2, dtype=np.int64), False], torch.empty(2, 2))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    ("a_shape", "b_shape"), [((3, 3), (3, 2)), ((2, 4, 4), (4, 1)), ((4, 4), (3, 4, 2)), ((0, 0), (0, 2))]
)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_matches_eager(dtype, a_shape, b_shape, upper):
    factor = torch.linalg.cholesky(spd(a_shape, torch.float64), upper=upper).to(dtype)
    b = randn(b_shape, dtype, seed=1)
    expected = torch.cholesky_solve(b, factor, upper=upper)
    check_op("aten::cholesky_solve.out", [to_numpy(b), to_numpy(factor), upper], expected, scale=10)


def test_cholesky_solve_refuses_mismatches():
    f, b = np.eye(3), np.ones((4, 2))
    with pytest.raises(KernelError, match="incompatible shapes"):
        call("aten::cholesky_solve.out", [b, f, False], torch.empty(4, 2, dtype=torch.float64))
    with pytest.raises(KernelError, match="same dtype"):
        call("aten::cholesky_solve.out", [b[:3].astype(np.float32), f, False], torch.empty(3, 2))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    ("a_shape", "b_shape"), [((3, 3), (3, 2)), ((2, 4, 4), (4, 3)), ((4, 4), (2, 4, 1)), ((0, 0), (0, 1))]
)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_triangular_solve_matches_eager(dtype, a_shape, b_shape, upper, transpose, unitriangular):
    a = well_conditioned(a_shape, dtype)  # both triangles full: only one may be read
    b = randn(b_shape, dtype, seed=2)
    expected = torch.triangular_solve(b, a, upper, transpose, unitriangular)
    check_op("aten::triangular_solve.X", [to_numpy(b), to_numpy(a), upper, transpose, unitriangular], expected)


def test_triangular_solve_of_a_zero_diagonal_gives_inf_like_eager():
    a = torch.tensor([[0.0, 1.0], [0.0, 2.0]], dtype=torch.float64)
    b = torch.ones(2, 1, dtype=torch.float64)
    check_op("aten::triangular_solve.X", [to_numpy(b), to_numpy(a), True, False, False], torch.triangular_solve(b, a))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 4, 3), (2, 1, 3, 3), (0, 0), (2, 0, 3)])
@pytest.mark.parametrize(("unpack_data", "unpack_pivots"), [(True, True), (True, False), (False, True), (False, False)])
def test_lu_unpack_matches_eager(dtype, shape, unpack_data, unpack_pivots):
    lu, pivots = torch.linalg.lu_factor(randn(shape, dtype, seed=3))
    expected = torch.lu_unpack(lu, pivots, unpack_data, unpack_pivots)
    args = [to_numpy(lu), to_numpy(pivots), unpack_data, unpack_pivots]
    outs = check_op("aten::lu_unpack.out", args, expected)
    if unpack_pivots:  # the permutation matrix is exact
        np.testing.assert_array_equal(outs[0], to_numpy(expected[0]))


def test_lu_unpack_refuses_bad_pivots():
    lu = np.eye(3)
    with pytest.raises(KernelError, match="int32"):
        call("aten::lu_unpack.out", [lu, np.ones(3, np.int64), True, True], tuple(torch.empty(3, 3) for _ in range(3)))
    with pytest.raises(KernelError, match=r"\[1, 3\]"):
        call(
            "aten::lu_unpack.out",
            [lu, np.array([1, 4, 3], np.int32), True, True],
            torch.lu_unpack(*torch.linalg.lu_factor(torch.eye(3))),
        )


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3), (0, 3), (2, 0, 0)])
def test_geqrf_matches_eager(dtype, shape):
    a = randn(shape, dtype, seed=4)
    check_op("aten::geqrf.a", [to_numpy(a)], torch.geqrf(a))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    ("a_shape", "c_shape", "left"),
    [
        ((5, 3), (5, 2), True),
        ((4, 4), (3, 4), False),
        ((2, 5, 2), (2, 5, 4), True),
        ((2, 3, 3), (2, 2, 3), False),
        ((3, 5), (3, 4), True),
    ],
)
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr_matches_eager(dtype, a_shape, c_shape, left, transpose):
    reflectors, tau = torch.geqrf(randn(a_shape, dtype, seed=5))
    c = randn(c_shape, dtype, seed=6)
    expected = torch.ormqr(reflectors, tau, c, left, transpose)
    args = [to_numpy(reflectors), to_numpy(tau), to_numpy(c), left, transpose]
    check_op("aten::ormqr.out", args, expected, scale=10)


def test_ormqr_refuses_mismatched_rows():
    reflectors, tau = torch.geqrf(torch.randn(4, 3, dtype=torch.float64))
    c = torch.randn(5, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError):
        torch.ormqr(reflectors, tau, c)
    with pytest.raises(KernelError, match="aten::ormqr.out.*other.shape"):
        call(
            "aten::ormqr.out",
            [to_numpy(reflectors), to_numpy(tau), to_numpy(c), True, False],
            torch.empty(5, 2, dtype=torch.float64),
        )


class Legacy(torch.nn.Module):
    def forward(self, a, b):
        spd = a @ a.mT + 4 * torch.eye(a.shape[-1])
        u = torch.cholesky(spd, upper=True)
        x = torch.cholesky_solve(b, u, upper=True)
        inv = torch.cholesky_inverse(u, upper=True)
        y, coefficient = torch.triangular_solve(b, u, upper=True, transpose=True)
        lu, pivots = torch.linalg.lu_factor(a)
        p, lower, upper = torch.lu_unpack(lu, pivots)
        reflectors, tau = torch.geqrf(a)
        qb = torch.ormqr(reflectors, tau, b, left=True, transpose=True)
        return x, inv, y, coefficient, p, lower, upper, reflectors, tau, qb


def test_legacy_linalg_program_matches_eager():
    g = torch.Generator().manual_seed(7)
    inputs = (torch.randn(2, 4, 4, generator=g), torch.randn(2, 4, 3, generator=g))
    program = to_edge(torch.export.export(Legacy(), inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = Legacy()(*inputs)
    assert len(got) == len(want)
    for g_, w in zip(got, want):
        assert g_.dtype == to_numpy(w).dtype and g_.shape == tuple(w.shape)
        np.testing.assert_allclose(g_, to_numpy(w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16, torch.bfloat16])
def test_lu_unpack_of_other_dtypes_matches_eager(dtype):
    lu, pivots = torch.linalg.lu_factor(randn((2, 3, 4), torch.float64, seed=8))
    data = (lu * 4).round().to(dtype)  # eager unpacks any dtype: only triangles and a permutation
    expected = torch.lu_unpack(data, pivots)
    outs = call("aten::lu_unpack.out", [to_numpy(data), to_numpy(pivots), True, True], expected)
    for got, want in zip(outs, expected):
        np.testing.assert_array_equal(got.astype(np.float64), to_numpy(want).astype(np.float64))
