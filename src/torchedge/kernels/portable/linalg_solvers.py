"""LU-based linalg kernels: det, slogdet, inv_ex, solve_ex, solve_triangular, lu, lu_factor_ex,
lu_solve, and ``_linalg_check_errors`` (the raising half of ``inv``, ``solve``, ``cholesky``...).

The LU factors and pivots are those of LAPACK's getrf (partial pivoting, first largest pivot);
like ATen, ``det`` and ``slogdet`` factor ``A^T`` and ``solve_ex`` factors ``A``. The ``_ex``
kernels report singular inputs in ``info`` and raise only when ``check_errors`` is set.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, fail, quiet
from torchedge.kernels.portable.linalg_common import (
    broadcast_batch,
    check_float_matrix,
    check_square,
    lu_factor,
    lu_permutation,
    lu_solve,
    triangular_solve,
    write_result,
)
from torchedge.kernels.registry import register_kernel

__all__ = [
    "linalg_det",
    "linalg_slogdet",
    "linalg_inv_ex",
    "linalg_solve_ex",
    "linalg_solve_triangular",
    "linalg_lu_factor_ex",
    "linalg_lu",
    "linalg_lu_solve",
    "linalg_check_errors",
    "raise_for_info",
]


def _info_message(api: str, code: int) -> str:
    if code < 0:
        return f"argument {-code} has an illegal value"
    if "inv" in api:
        return f"the diagonal element {code} is zero: the input matrix is singular and cannot be inverted"
    if "solve" in api:
        return "the solver failed because the input matrix is singular"
    if "cholesky" in api:
        return f"the input is not positive-definite (its leading minor of order {code} is not positive-definite)"
    if "lu_factor" in api:
        return (
            f"U[{code},{code}] is zero, so lu_solve would divide by zero; "
            "linalg.lu or linalg.lu_factor_ex factor such matrices without raising"
        )
    if "svd" in api or "eig" in api:
        return f"the algorithm failed to converge (error code {code})"
    return f"unknown error code {code}"


def raise_for_info(op: str, api: str, info: np.ndarray, is_matrix: bool) -> None:
    """Raise `KernelError` naming ``op`` and ``api`` when ``info`` holds a nonzero code."""
    codes = np.asarray(info).reshape(-1)
    bad = np.flatnonzero(codes)
    if bad.size == 0:
        return
    where = "" if is_matrix else f"(batch element {int(bad[0])}) "
    fail(op, f"{api}: {where}{_info_message(api, int(codes[bad[0]]))}")


@register_kernel("aten::_linalg_check_errors", checks_only=True)
def linalg_check_errors(info, api_name, is_matrix):
    raise_for_info("aten::_linalg_check_errors", api_name, info, is_matrix)


def _square_shapes(op: str, A, *rest) -> list[tuple]:
    check_square(op, "A", A)
    return [A.shape[:-2], A.shape, A.shape[:-1]]


@register_kernel("aten::_linalg_det.result", shape=_square_shapes)
def linalg_det(A, result, LU, pivots):
    check_square("aten::_linalg_det.result", "A", A)
    lu, piv, _ = lu_factor(np.swapaxes(A, -1, -2))
    with quiet():
        write_result(result, np.prod(np.diagonal(lu, 0, -2, -1), axis=-1) * _parity(piv))
    write_result(LU, lu)
    write_result(pivots, piv)


def _parity(pivots: np.ndarray) -> np.ndarray:
    """+1 or -1: the sign of the permutation of LAPACK's row swaps."""
    swaps = np.count_nonzero(pivots != np.arange(1, pivots.shape[-1] + 1, dtype=pivots.dtype), axis=-1)
    return np.where(swaps % 2 == 0, 1.0, -1.0)


def _slogdet_shapes(op: str, A, *rest) -> list[tuple]:
    check_square(op, "A", A)
    return [A.shape[:-2], A.shape[:-2], A.shape, A.shape[:-1]]


@register_kernel("aten::_linalg_slogdet.sign", shape=_slogdet_shapes)
def linalg_slogdet(A, sign, logabsdet, LU, pivots):
    check_square("aten::_linalg_slogdet.sign", "A", A)
    lu, piv, _ = lu_factor(np.swapaxes(A, -1, -2))
    diag = np.diagonal(lu, 0, -2, -1)
    with quiet():
        write_result(sign, np.prod(np.sign(diag), axis=-1) * _parity(piv))
        write_result(logabsdet, np.sum(np.log(np.abs(diag)), axis=-1))
    write_result(LU, lu)
    write_result(pivots, piv)


def _inv_shapes(op: str, A, check_errors, inverse, info) -> list[tuple]:
    check_square(op, "A", A)
    return [A.shape, A.shape[:-2]]


@register_kernel("aten::linalg_inv_ex.inverse", shape=_inv_shapes)
def linalg_inv_ex(A, check_errors, inverse, info):
    op = "aten::linalg_inv_ex.inverse"
    check_square(op, "A", A)
    lu, piv, codes = lu_factor(A)
    if check_errors:
        raise_for_info(op, "linalg.inv_ex", codes, A.ndim == 2)
    eye = np.broadcast_to(np.eye(A.shape[-1]), A.shape)
    with quiet():
        write_result(inverse, lu_solve(lu, piv, eye))
    write_result(info, codes)


def _is_vector_rhs(A, B, left: bool) -> bool:
    return B.ndim == 1 or (left and B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


def _solve_shapes(op: str, A, B, left, check_errors, *outs) -> list[tuple]:
    check_square(op, "A", A)
    check_float_matrix(op, "B", B, min_ndim=1)
    check(A.dtype == B.dtype, op, f"A ({A.dtype}) and B ({B.dtype}) must have the same dtype")
    vector = _is_vector_rhs(A, B, left)
    check(left or not vector, op, "a vector B is not supported with left=False (that is B / A.squeeze(-1))")
    n = A.shape[-1]
    rows = B.shape[-1] if vector else B.shape[-2] if left else B.shape[-1]
    check(rows == n, op, f"incompatible shapes of A {list(A.shape)} and B {list(B.shape)}")
    if vector:
        result = broadcast_batch(op, A.shape, B.shape[:-1] + (1, 1)) + (n,)
    else:
        result = broadcast_batch(op, A.shape, B.shape) + B.shape[-2:]
    return [result, A.shape, A.shape[:-1], A.shape[:-2]]


@register_kernel("aten::_linalg_solve_ex.result", shape=_solve_shapes)
def linalg_solve_ex(A, B, left, check_errors, result, LU, pivots, info):
    op = "aten::_linalg_solve_ex.result"
    _solve_shapes(op, A, B, left, check_errors)
    lu, piv, codes = lu_factor(A)
    if check_errors:
        raise_for_info(op, "torch.linalg.solve_ex", codes, A.ndim == 2)
    vector = _is_vector_rhs(A, B, left)
    rhs = B[..., None] if vector else B if left else np.swapaxes(B, -1, -2)
    with quiet():
        x = lu_solve(lu, piv, rhs, adjoint=not left)
    x = x[..., 0] if vector else x if left else np.swapaxes(x, -1, -2)
    write_result(result, x)
    write_result(LU, lu)
    write_result(pivots, piv)
    write_result(info, codes)


def _triangular_shape(op: str, self, B, upper, left, unitriangular, out) -> list[tuple]:
    check_square(op, "A", self)
    check_float_matrix(op, "B", B)
    check(self.dtype == B.dtype, op, f"A ({self.dtype}) and B ({B.dtype}) must have the same dtype")
    rows = B.shape[-2] if left else B.shape[-1]
    check(rows == self.shape[-1], op, f"incompatible shapes of A {list(self.shape)} and B {list(B.shape)}")
    return [broadcast_batch(op, self.shape, B.shape) + B.shape[-2:]]


@register_kernel("aten::linalg_solve_triangular.out", shape=_triangular_shape)
def linalg_solve_triangular(self, B, upper, left, unitriangular, out):
    _triangular_shape("aten::linalg_solve_triangular.out", self, B, upper, left, unitriangular, out)
    with quiet():
        if left:
            x = triangular_solve(self, B, upper, unitriangular)
        else:  # X A = B  <=>  A^T X^T = B^T, and A^T has the other triangle
            x = np.swapaxes(
                triangular_solve(np.swapaxes(self, -1, -2), np.swapaxes(B, -1, -2), not upper, unitriangular), -1, -2
            )
    write_result(out, x)


def _lu_factor_shapes(op: str, A, pivot, check_errors, *outs) -> list[tuple]:
    check_float_matrix(op, "A", A)
    return [A.shape, A.shape[:-2] + (min(A.shape[-2:]),), A.shape[:-2]]


def _check_pivot(op: str, pivot: bool) -> None:
    check(pivot, op, "LU without pivoting is not implemented on the CPU")


@register_kernel("aten::linalg_lu_factor_ex.out", shape=_lu_factor_shapes)
def linalg_lu_factor_ex(A, pivot, check_errors, LU, pivots, info):
    op = "aten::linalg_lu_factor_ex.out"
    check_float_matrix(op, "A", A)
    _check_pivot(op, pivot)
    with quiet():
        lu, piv, codes = lu_factor(A)
    if check_errors:
        raise_for_info(op, "torch.linalg.lu_factor_ex", codes, A.ndim == 2)
    write_result(LU, lu)
    write_result(pivots, piv)
    write_result(info, codes)


def _lu_shapes(op: str, A, pivot, P, L, U) -> list[tuple]:
    check_float_matrix(op, "A", A)
    batch, (m, n) = A.shape[:-2], A.shape[-2:]
    k = min(m, n)
    return [batch + (m, m), batch + (m, k), batch + (k, n)]


@register_kernel("aten::linalg_lu.out", shape=_lu_shapes)
def linalg_lu(A, pivot, P, L, U):
    op = "aten::linalg_lu.out"
    check_float_matrix(op, "A", A)
    _check_pivot(op, pivot)
    m, n = A.shape[-2:]
    k = min(m, n)
    with quiet():
        lu, piv, _ = lu_factor(A)
    lower = np.tril(lu[..., :, :k], -1)
    lower[..., np.arange(k), np.arange(k)] = 1.0
    write_result(L, lower)
    write_result(U, np.triu(lu[..., :k, :]))
    perm = lu_permutation(piv, m)  # P^T A = A[perm], so P[perm[i], i] = 1
    eye = np.eye(m)
    write_result(P, np.swapaxes(eye[perm], -1, -2))


def _lu_solve_shape(op: str, LU, pivots, B, left, adjoint, out) -> list[tuple]:
    check_square(op, "LU", LU)
    check_float_matrix(op, "B", B)
    check(LU.dtype == B.dtype, op, f"LU ({LU.dtype}) and B ({B.dtype}) must have the same dtype")
    check(pivots.dtype == np.int32, op, f"pivots must be int32, got {pivots.dtype}")
    check(pivots.shape[-1:] == LU.shape[-1:], op, f"pivots {list(pivots.shape)} do not match LU {list(LU.shape)}")
    rows = B.shape[-2] if left else B.shape[-1]
    check(rows == LU.shape[-1], op, f"incompatible shapes of LU {list(LU.shape)} and B {list(B.shape)}")
    return [broadcast_batch(op, LU.shape, pivots.shape + (1,), B.shape) + B.shape[-2:]]


@register_kernel("aten::linalg_lu_solve.out", shape=_lu_solve_shape)
def linalg_lu_solve(LU, pivots, B, left, adjoint, out):
    op = "aten::linalg_lu_solve.out"
    _lu_solve_shape(op, LU, pivots, B, left, adjoint, out)
    n = LU.shape[-1]
    check(bool(np.all((pivots >= 1) & (pivots <= n))), op, f"pivots must lie in [1, {n}]")
    with quiet():
        if left:
            x = lu_solve(LU, pivots, B, adjoint)
        else:  # X A = B  <=>  A^T X^T = B^T
            x = np.swapaxes(lu_solve(LU, pivots, np.swapaxes(B, -1, -2), not adjoint), -1, -2)
    write_result(out, x)
