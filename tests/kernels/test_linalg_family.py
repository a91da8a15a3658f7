"""LU-based linalg kernels against eager: det, slogdet, inv_ex, solve_ex, solve_triangular,
lu_factor_ex, lu, lu_solve and _linalg_check_errors (float32/float64, batches, empty, singular)."""

import numpy as np
import pytest
import torch

from tests.kernels.linalg_helpers import call, check_op, randn, well_conditioned
from torchedge.errors import KernelError
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel

FLOATS = [torch.float32, torch.float64]
SQUARE = [(4, 4), (2, 3, 3), (2, 1, 5, 5), (1, 1), (0, 0), (0, 3, 3), (2, 0, 0)]
# exactly singular in every rounding: LU's zero pivots come out as exact zeros in eager and here
SINGULAR = torch.tensor(
    [[[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]], [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]]
)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_det_and_slogdet_match_eager(dtype, shape):
    a = randn(shape, dtype)  # random, not dominant: pivoting and negative determinants happen
    check_op("aten::_linalg_det.result", [to_numpy(a)], torch.ops.aten._linalg_det(a))
    check_op("aten::_linalg_slogdet.sign", [to_numpy(a)], torch.ops.aten._linalg_slogdet(a))


@pytest.mark.parametrize("dtype", FLOATS)
def test_det_and_slogdet_of_singular_matrices(dtype):
    a = SINGULAR.to(dtype)
    check_op("aten::_linalg_det.result", [to_numpy(a)], torch.ops.aten._linalg_det(a), skip=(1,))
    check_op("aten::_linalg_slogdet.sign", [to_numpy(a)], torch.ops.aten._linalg_slogdet(a), skip=(2,))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_inv_ex_matches_eager(dtype, shape):
    a = well_conditioned(shape, dtype)
    check_op("aten::linalg_inv_ex.inverse", [to_numpy(a), False], torch.linalg.inv_ex(a))


def test_inv_ex_reports_singular_matrices_in_info():
    a = SINGULAR
    inverse, info = call("aten::linalg_inv_ex.inverse", [to_numpy(a), False], torch.linalg.inv_ex(a))
    np.testing.assert_array_equal(info, torch.linalg.inv_ex(a).info.numpy())  # the inverse itself is undefined
    with pytest.raises(KernelError, match=r"linalg_inv_ex.*\(batch element 0\).*singular"):
        call("aten::linalg_inv_ex.inverse", [to_numpy(a), True], torch.linalg.inv_ex(a))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    ("a_shape", "b_shape", "left"),
    [
        ((3, 3), (3, 2), True),
        ((2, 4, 4), (3, 1, 4, 2), True),
        ((2, 4, 4), (4,), True),
        ((2, 4, 4), (2, 4), True),  # B is a batch of vectors
        ((2, 4, 4), (5, 2, 4, 1), True),
        ((2, 4, 4), (2, 3, 4), False),
        ((0, 3, 3), (3, 1), True),
        ((3, 3), (3, 0), True),
    ],
)
def test_solve_ex_matches_eager(dtype, a_shape, b_shape, left):
    a, b = well_conditioned(a_shape, dtype), randn(b_shape, dtype, seed=2)
    args = [to_numpy(a), to_numpy(b), left, False]
    check_op("aten::_linalg_solve_ex.result", args, torch.ops.aten._linalg_solve_ex(a, b, left=left))


def test_solve_ex_refuses_what_eager_refuses():
    a, b = torch.eye(3), torch.ones(3)
    with pytest.raises(RuntimeError):
        torch.ops.aten._linalg_solve_ex(a, b, left=False)
    solve = get_kernel("aten::_linalg_solve_ex.result").fn
    outs = [np.empty(3), np.empty((3, 3)), np.empty(3, np.int32), np.empty((), np.int32)]
    with pytest.raises(KernelError, match="left=False"):
        solve(to_numpy(a), to_numpy(b), False, False, *outs)
    with pytest.raises(KernelError, match="incompatible shapes"):
        solve(to_numpy(a), np.ones((2, 3), np.float32), True, False, *outs)
    with pytest.raises(KernelError, match="float32 or float64"):
        solve(np.eye(3, dtype=np.int64), np.ones(3, np.int64), True, False, *outs)
    with pytest.raises(KernelError, match="solver failed"):
        solve(to_numpy(SINGULAR[0]), np.ones(3, np.float32), True, True, *outs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_solve_triangular_matches_eager(dtype, upper, left, unitriangular):
    a = well_conditioned((2, 4, 4), dtype)
    b = randn((3, 1, 4, 2) if left else (3, 1, 2, 4), dtype, seed=3)
    expected = torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unitriangular)
    check_op("aten::linalg_solve_triangular.out", [to_numpy(a), to_numpy(b), upper, left, unitriangular], expected)


def test_solve_triangular_with_a_zero_diagonal_gives_inf_like_eager():
    a, b = torch.tensor([[1.0, 2.0], [0.0, 0.0]]), torch.tensor([[1.0], [1.0]])
    expected = torch.linalg.solve_triangular(a, b, upper=True)
    check_op("aten::linalg_solve_triangular.out", [to_numpy(a), to_numpy(b), True, True, False], expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (2, 3, 5), (1, 1), (0, 3), (3, 0), (0, 2, 2)])
def test_lu_factor_ex_and_lu_match_eager(dtype, shape):
    a = randn(shape, dtype)
    check_op("aten::linalg_lu_factor_ex.out", [to_numpy(a), True, False], torch.linalg.lu_factor_ex(a))
    check_op("aten::linalg_lu.out", [to_numpy(a), True], torch.linalg.lu(a))


def test_lu_factor_of_singular_matrices_matches_eager():
    check_op("aten::linalg_lu_factor_ex.out", [to_numpy(SINGULAR), True, False], torch.linalg.lu_factor_ex(SINGULAR))
    check_op("aten::linalg_lu.out", [to_numpy(SINGULAR), True], torch.linalg.lu(SINGULAR))
    with pytest.raises(RuntimeError):
        torch.linalg.lu_factor(SINGULAR)
    with pytest.raises(KernelError, match=r"\(batch element 0\) U\[2,2\] is zero"):
        call("aten::linalg_lu_factor_ex.out", [to_numpy(SINGULAR), True, True], torch.linalg.lu_factor_ex(SINGULAR))
    with pytest.raises(KernelError, match="without pivoting"):
        call("aten::linalg_lu.out", [to_numpy(SINGULAR), False], torch.linalg.lu(SINGULAR))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve_matches_eager(dtype, left, adjoint):
    lu, pivots = torch.linalg.lu_factor(randn((2, 4, 4), dtype))
    b = randn((3, 1, 4, 2) if left else (3, 1, 2, 4), dtype, seed=4)
    expected = torch.linalg.lu_solve(lu, pivots, b, left=left, adjoint=adjoint)
    check_op(
        "aten::linalg_lu_solve.out", [to_numpy(lu), to_numpy(pivots), to_numpy(b), left, adjoint], expected, scale=10
    )


@pytest.mark.parametrize(
    ("api", "info", "is_matrix", "message"),
    [
        ("linalg.inv", torch.tensor(2, dtype=torch.int32), True, "diagonal element 2 is zero"),
        ("linalg.cholesky", torch.tensor([0, 1], dtype=torch.int32), False, r"\(batch element 1\).*order 1"),
        ("torch.linalg.solve", torch.tensor([3], dtype=torch.int32), False, "singular"),
    ],
)
def test_check_errors_raises_like_eager(api, info, is_matrix, message):
    with pytest.raises(RuntimeError):
        torch.ops.aten._linalg_check_errors(info, api, is_matrix=is_matrix)
    with pytest.raises(KernelError, match=f"aten::_linalg_check_errors: {api}: .*{message}"):
        get_kernel("aten::_linalg_check_errors").fn(to_numpy(info), api, is_matrix)
    get_kernel("aten::_linalg_check_errors").fn(np.zeros_like(to_numpy(info)), api, is_matrix)  # no error: returns


@pytest.mark.parametrize(
    "op",
    [
        "aten::_linalg_det.result",
        "aten::linalg_inv_ex.inverse",
        "aten::linalg_lu_factor_ex.out",
        "aten::_linalg_slogdet.sign",
    ],
)
def test_integer_and_non_square_inputs_are_refused(op):
    with pytest.raises(RuntimeError):
        torch.linalg.det(torch.eye(2, dtype=torch.int64))
    extra = {"aten::linalg_inv_ex.inverse": [False], "aten::linalg_lu_factor_ex.out": [True, False]}.get(op, [])
    kernel = get_kernel(op)
    outs = [np.empty(1)] * (kernel.num_args - 1 - len(extra))
    with pytest.raises(KernelError, match="float32 or float64"):
        kernel.fn(np.eye(2, dtype=np.int64), *extra, *outs)
    if op != "aten::linalg_lu_factor_ex.out":
        with pytest.raises(KernelError, match="square"):
            kernel.fn(np.ones((2, 3)), *extra, *outs)


class _LinalgModule(torch.nn.Module):
    """The public linalg functions whose programs hold no `_linalg_check_errors` (see the report)."""

    def forward(self, a, b, v):
        spd_a = a @ a.mT + 4 * torch.eye(a.shape[-1])
        lu, pivots, _ = torch.linalg.lu_factor_ex(a)
        p, lower, upper = torch.linalg.lu(a)
        q, r = torch.linalg.qr(b)
        u, s, vh = torch.linalg.svd(b, full_matrices=False)
        w, vecs = torch.linalg.eigh(spd_a)
        ld, ld_pivots, _ = torch.linalg.ldl_factor_ex(a + a.mT)
        return (
            ld,
            ld_pivots,
            torch.linalg.ldl_solve(ld, ld_pivots, b),
            torch.linalg.vector_norm(v, 3, dim=-1),
            torch.linalg.matrix_norm(a),
            torch.linalg.matrix_norm(a, 2),
            torch.linalg.matrix_norm(a, "nuc"),
            torch.linalg.norm(b),
            torch.linalg.det(a),
            torch.linalg.slogdet(a)[1],
            torch.linalg.inv_ex(a)[0],
            torch.linalg.solve_ex(a, b)[0],
            torch.linalg.solve_triangular(a, b, upper=True),
            torch.linalg.cholesky_ex(spd_a)[0],
            lu,
            pivots,
            p @ lower @ upper,
            torch.linalg.lu_solve(lu, pivots, b),
            q,
            r,
            u @ torch.diag_embed(s) @ vh,
            s,
            torch.linalg.svdvals(a),
            w,
            vecs @ torch.diag_embed(w) @ vecs.mT,
            torch.linalg.eigvalsh(spd_a),
            torch.linalg.pinv(b),
            torch.linalg.matrix_exp(a * 0.1),
            torch.linalg.householder_product(b, v[..., :2]),
            torch.linalg.cond(a),
            torch.linalg.matrix_rank(a),
            torch.linalg.matrix_power(a, 3),
            torch.dist(a, b.sum(-1, keepdim=True), 1.5),
            torch.renorm(b, 2, 0, 1.0),
            torch.nn.functional.normalize(b),
            torch.nn.functional.cosine_similarity(a, a.flip(-1)),
            torch.nn.functional.pairwise_distance(a, a.flip(-1)),
            torch.norm(v, 1, dim=-1),
            torch.cdist(a, b.mT),
        )


def test_public_linalg_functions_run_end_to_end():
    from torchedge.exir import to_edge
    from torchedge.runtime import Runtime

    inputs = (
        well_conditioned((2, 4, 4), torch.float32),
        randn((2, 4, 3), torch.float32, 1),
        randn((2, 4), torch.float32, 2),
    )
    program = to_edge(torch.export.export(_LinalgModule(), inputs)).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    got = method.execute([to_numpy(t) for t in inputs])
    expected = _LinalgModule()(*inputs)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        want = to_numpy(e)
        assert g.shape == want.shape and g.dtype == want.dtype, i
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4, err_msg=f"output {i}")


def test_raising_linalg_functions_run_end_to_end():
    """inv, solve, cholesky and lu_factor check their inputs through ``_linalg_check_errors``, which
    export wraps in an effect token; the program runs the check in order and raises on bad input."""
    from torchedge.errors import KernelError
    from torchedge.exir import to_edge
    from torchedge.runtime import Runtime

    class Raising(torch.nn.Module):
        def forward(self, a, b):
            spd = a @ a.mT + 4 * torch.eye(3)
            return (
                torch.linalg.inv(a),
                torch.linalg.solve(a, b),
                torch.linalg.cholesky(spd),
                torch.linalg.lu_factor(a)[0],
            )

    a, b = torch.randn(3, 3) + 3 * torch.eye(3), torch.randn(3, 2)
    method = Runtime.get().load_program(to_edge(torch.export.export(Raising(), (a, b))).to_executorch().buffer)
    method = method.load_method("forward")
    for got, want in zip(method.execute([a.numpy(), b.numpy()]), Raising()(a, b)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(KernelError, match="singular"):
        method.execute([np.zeros((3, 3), np.float32), b.numpy()])
