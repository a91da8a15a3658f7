"""`aten::linalg_ldl_factor_ex.out` and `aten::linalg_ldl_solve.out` against eager: Bunch-Kaufman
pivots (1x1 and 2x2 blocks) exactly, factors and solutions to tolerance, info and errors."""

import numpy as np
import pytest
import torch

from tests.kernels.linalg_helpers import call, check_op, randn
from torchedge.errors import KernelError
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel

FLOATS = [torch.float32, torch.float64]


def _symmetric(shape, dtype, small_diagonal: bool, seed: int = 0) -> torch.Tensor:
    a = randn(shape, torch.float64, seed)
    a = a + a.mT
    if small_diagonal:  # forces 2x2 pivots and row exchanges
        a.diagonal(dim1=-2, dim2=-1).mul_(0.01)
    return a.to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("small_diagonal", [False, True])
@pytest.mark.parametrize("shape", [(4, 4), (3, 6, 6), (2, 1, 9, 9), (1, 1), (0, 0), (2, 0, 0)])
def test_ldl_factor_ex_matches_eager(dtype, small_diagonal, shape):
    a = _symmetric(shape, dtype, small_diagonal)
    check_op("aten::linalg_ldl_factor_ex.out", [to_numpy(a), False, False], torch.linalg.ldl_factor_ex(a))


@pytest.mark.parametrize("seed", range(20))
def test_ldl_factor_ex_pivots_match_eager_on_random_sizes(seed):
    n = 1 + seed % 11
    a = _symmetric((2, n, n), torch.float64, seed % 2 == 0, seed)
    check_op("aten::linalg_ldl_factor_ex.out", [to_numpy(a), False, False], torch.linalg.ldl_factor_ex(a))


def test_ldl_factor_ex_reports_zero_pivots_in_info():
    a = torch.stack([torch.zeros(3, 3), torch.eye(3), torch.diag(torch.tensor([1.0, 0.0, 2.0]))])
    check_op("aten::linalg_ldl_factor_ex.out", [to_numpy(a), False, False], torch.linalg.ldl_factor_ex(a))
    with pytest.raises(KernelError, match=r"linalg_ldl_factor_ex.*\(batch element 0\)"):
        call("aten::linalg_ldl_factor_ex.out", [to_numpy(a), False, True], torch.linalg.ldl_factor_ex(a))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("small_diagonal", [False, True])
@pytest.mark.parametrize(("shape", "rhs"), [((5, 5), 2), ((3, 6, 6), 1), ((2, 4, 4), 0), ((0, 0), 2)])
def test_ldl_solve_matches_eager(dtype, small_diagonal, shape, rhs):
    ld, pivots = torch.linalg.ldl_factor(
        _symmetric(shape, dtype, small_diagonal) + 3 * torch.eye(shape[-1], dtype=dtype)
    )
    b = randn(shape[:-1] + (rhs,), dtype, seed=3)
    args = [to_numpy(ld), to_numpy(pivots), to_numpy(b), False]
    check_op("aten::linalg_ldl_solve.out", args, torch.linalg.ldl_solve(ld, pivots, b), scale=10)


def test_ldl_solve_broadcasts_batches():
    """Eager crashes broadcasting LD against B (torch 2.13), so the reference expands LD first."""
    ld, pivots = torch.linalg.ldl_factor(_symmetric((3, 4, 4), torch.float64, True))
    b = randn((2, 1, 4, 2), torch.float64, seed=4)
    expected = torch.linalg.ldl_solve(
        ld.expand(2, 3, 4, 4).contiguous(), pivots.expand(2, 3, 4).contiguous(), b.expand(2, 3, 4, 2).contiguous()
    )
    check_op("aten::linalg_ldl_solve.out", [to_numpy(ld), to_numpy(pivots), to_numpy(b), False], expected)


@pytest.mark.parametrize(
    ("op", "args", "message"),
    [
        ("aten::linalg_ldl_factor_ex.out", [np.eye(3, dtype=np.int64), False, False], "float32 or float64"),
        ("aten::linalg_ldl_factor_ex.out", [np.ones((2, 3)), False, False], "square"),
        ("aten::linalg_ldl_solve.out", [np.eye(3), np.ones(3, np.int32), np.ones(3), False], "at least 2 dimensions"),
        (
            "aten::linalg_ldl_solve.out",
            [np.eye(3), np.ones(3, np.int32), np.ones((3, 1), np.float32), False],
            "same dtype",
        ),
        ("aten::linalg_ldl_solve.out", [np.eye(3), np.full(3, 7, np.int32), np.ones((3, 1)), False], "pivots must lie"),
    ],
)
def test_ldl_refuses_bad_inputs(op, args, message):
    kernel = get_kernel(op)
    with pytest.raises(KernelError, match=message):
        kernel.fn(*args, *[np.empty(1)] * (kernel.num_args - len(args)))
