"""Linalg operators of the pre-``torch.linalg`` API that exported programs keep: cholesky,
cholesky_solve, cholesky_inverse, triangular_solve, lu_unpack, geqrf and ormqr.

Real float32/float64 inputs (integers refused, as in ATen), batched; computed in float64 and
rounded once into ``out``. ``geqrf`` calls LAPACK's geqrf through NumPy (``qr(mode='raw')``), as
eager does, so its reflectors and ``tau`` match eager's; ``ormqr`` applies those reflectors one
at a time for the whole batch.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, fail, quiet
from torchedge.kernels.portable.linalg_common import (
    broadcast_batch,
    check_float_matrix,
    check_square,
    lu_permutation,
    triangular_solve,
    write_result,
)
from torchedge.kernels.portable.linalg_factorizations import linalg_cholesky_ex
from torchedge.kernels.portable.linalg_solvers import raise_for_info
from torchedge.kernels.registry import register_kernel

__all__ = ["cholesky", "cholesky_solve", "cholesky_inverse", "legacy_triangular_solve", "lu_unpack", "geqrf", "ormqr"]


def _same_dtype(op: str, a: np.ndarray, a_name: str, b: np.ndarray, b_name: str) -> None:
    check(
        a.dtype == b.dtype,
        op,
        f"expected {a_name} and {b_name} to have the same dtype, but got {a_name}.dtype = {a.dtype} "
        f"and {b_name}.dtype = {b.dtype}",
    )


def _cholesky_shape(op: str, self, upper, out) -> list[tuple]:
    check_square(op, "A", self)
    return [self.shape]


@register_kernel("aten::cholesky.out", shape=_cholesky_shape)
def cholesky(self, upper, out):
    """The Cholesky factor L (``upper``: U = L^T); raises on a matrix that is not positive-definite."""
    op = "aten::cholesky.out"
    check_square(op, "A", self)
    factor = np.empty(self.shape, np.float64)
    info = np.empty(self.shape[:-2], np.int32)
    linalg_cholesky_ex(self, upper, False, factor, info)
    raise_for_info(op, "torch.cholesky", info, self.ndim == 2)
    write_result(out, factor)


def _two_triangles(t: np.ndarray, b: np.ndarray, upper: bool) -> np.ndarray:
    """``X`` with ``A X = B`` for ``A = L L^T`` (``upper``: ``U^T U``), the factor's triangle read."""
    t_t = np.swapaxes(t, -1, -2)
    first, second = (t_t, t) if upper else (t, t_t)
    return triangular_solve(second, triangular_solve(first, b, False, False), True, False)


def _cholesky_solve_shape(op: str, self, input2, upper, out) -> list[tuple]:
    check_float_matrix(op, "B", self)
    check_square(op, "A", input2)
    _same_dtype(op, self, "self", input2, "A")
    check(
        self.shape[-2] == input2.shape[-1],
        op,
        f"incompatible shapes of A {list(input2.shape)} and B {list(self.shape)} "
        f"({input2.shape[-2]}x{input2.shape[-1]} and {self.shape[-2]}x{self.shape[-1]})",
    )
    return [broadcast_batch(op, self.shape, input2.shape) + self.shape[-2:]]


@register_kernel("aten::cholesky_solve.out", shape=_cholesky_solve_shape)
def cholesky_solve(self, input2, upper, out):
    """``X`` with ``A X = self`` for ``A`` given by its Cholesky factor ``input2``."""
    _cholesky_solve_shape("aten::cholesky_solve.out", self, input2, upper, out)
    with quiet():
        write_result(out, _two_triangles(input2, self, upper))


def _cholesky_inverse_shape(op: str, self, upper, out) -> list[tuple]:
    check_square(op, "A", self)
    return [self.shape]


@register_kernel("aten::cholesky_inverse.out", shape=_cholesky_inverse_shape)
def cholesky_inverse(self, upper, out):
    """The inverse of ``A = L L^T`` (``upper``: ``U^T U``) from its factor ``self``."""
    check_square("aten::cholesky_inverse.out", "A", self)
    eye = np.broadcast_to(np.eye(self.shape[-1]), self.shape)
    with quiet():
        write_result(out, _two_triangles(self, eye, upper))


def _triangular_solve_shapes(op: str, self, A, upper, transpose, unitriangular, X, M) -> list[tuple]:
    check_float_matrix(op, "B", self)
    check_square(op, "A", A)
    _same_dtype(op, self, "self", A, "A")
    check(
        self.shape[-2] == A.shape[-1],
        op,
        f"incompatible shapes of A {list(A.shape)} and B {list(self.shape)} "
        f"({A.shape[-2]}x{A.shape[-1]} and {self.shape[-2]}x{self.shape[-1]})",
    )
    batch = broadcast_batch(op, self.shape, A.shape)
    return [batch + self.shape[-2:], batch + A.shape[-2:]]


@register_kernel("aten::triangular_solve.X", shape=_triangular_solve_shapes)
def legacy_triangular_solve(self, A, upper, transpose, unitriangular, X, M):
    """``X`` with ``A X = self`` (``transpose``: ``A^T X = self``) reading one triangle of ``A``,
    and ``M``: ``A`` broadcast to the batch (the "cloned coefficient")."""
    op = "aten::triangular_solve.X"
    shapes = _triangular_solve_shapes(op, self, A, upper, transpose, unitriangular, X, M)
    t = np.swapaxes(A, -1, -2) if transpose else A
    with quiet():
        write_result(X, triangular_solve(t, self, upper != transpose, unitriangular))
    write_result(M, np.broadcast_to(A, shapes[1]))


def _lu_unpack_shapes(op: str, LU_data, LU_pivots, unpack_data, unpack_pivots, P, L, U) -> list[tuple]:
    check(LU_data.ndim >= 2, op, f"LU_data must have at least 2 dimensions, got {LU_data.ndim}")
    check(
        LU_pivots.dtype == np.int32,
        op,
        f"LU_pivots is expected to be an int32 tensor (as torch.linalg.lu_factor returns), got {LU_pivots.dtype}",
    )
    batch, (m, n) = LU_data.shape[:-2], LU_data.shape[-2:]
    k = min(m, n)
    check(
        LU_pivots.shape[:-1] == batch and LU_pivots.shape[-1:] == (k,),
        op,
        f"LU_pivots {list(LU_pivots.shape)} do not match LU_data {list(LU_data.shape)}: expected {list(batch) + [k]}",
    )
    p = batch + (m, m) if unpack_pivots else (0,)
    lower, upper = (batch + (m, k), batch + (k, n)) if unpack_data else ((0,), (0,))
    return [p, lower, upper]


@register_kernel("aten::lu_unpack.out", shape=_lu_unpack_shapes)
def lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots, P, L, U):
    """P, L (unit lower), U from the packed factors and 1-based pivots of ``linalg.lu_factor``;
    an output that its flag turns off is left empty."""
    op = "aten::lu_unpack.out"
    _lu_unpack_shapes(op, LU_data, LU_pivots, unpack_data, unpack_pivots, P, L, U)
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    if unpack_data:
        lower = np.tril(LU_data[..., :, :k], -1)
        lower[..., np.arange(k), np.arange(k)] = 1
        write_result(L, lower)
        write_result(U, np.triu(LU_data[..., :k, :]))
    if unpack_pivots:
        check(
            bool(np.all((LU_pivots >= 1) & (LU_pivots <= m))),
            op,
            f"the pivots must lie in [1, {m}] (1-based row indices as torch.linalg.lu_factor returns)",
        )
        perm = lu_permutation(LU_pivots, m)  # P^T A = A[perm], so P[perm[i], i] = 1
        write_result(P, np.swapaxes(np.eye(m)[perm], -1, -2))


def _geqrf_shapes(op: str, self, a, tau) -> list[tuple]:
    check_float_matrix(op, "input", self)
    return [self.shape, self.shape[:-2] + (min(self.shape[-2:]),)]


@register_kernel("aten::geqrf.a", shape=_geqrf_shapes)
def geqrf(self, a, tau):
    """LAPACK's geqrf: R on and above the diagonal, the Householder vectors below, and ``tau``."""
    op = "aten::geqrf.a"
    shapes = _geqrf_shapes(op, self, a, tau)
    if self.size == 0:
        write_result(a, self)
        write_result(tau, np.zeros(shapes[1]))
        return
    try:
        with quiet():
            h, t = np.linalg.qr(self.astype(np.float64), mode="raw")
    except np.linalg.LinAlgError as e:
        fail(op, f"the factorization failed ({e}); the input may hold inf or nan")
    write_result(a, np.swapaxes(h, -1, -2))
    write_result(tau, t)


def _ormqr_shape(op: str, self, input2, input3, left, transpose, out) -> list[tuple]:
    check_float_matrix(op, "input", self)
    check_float_matrix(op, "tau", input2, min_ndim=1)
    check_float_matrix(op, "other", input3)
    _same_dtype(op, self, "input", input2, "tau")
    _same_dtype(op, self, "input", input3, "other")
    check(
        self.ndim == input3.ndim,
        op,
        f"input and other must have the same number of dimensions, got {self.ndim} and {input3.ndim}",
    )
    check(input2.ndim == self.ndim - 1, op, "tau must have one dimension fewer than input")
    rows = input3.shape[-2] if left else input3.shape[-1]
    side = "-2" if left else "-1"
    check(
        self.shape[-2] == rows, op, f"input.shape[-2] must equal other.shape[{side}] (got {self.shape[-2]} and {rows})"
    )
    check(input2.shape[-1] <= self.shape[-1], op, "tau.shape[-1] must be less than or equal to input.shape[-1]")
    check(input2.shape[-1] <= rows, op, f"tau.shape[-1] must be less than or equal to other.shape[{side}]")
    check(
        self.shape[:-2] == input3.shape[:-2] == input2.shape[:-1],
        op,
        f"the batch dimensions of input {list(self.shape[:-2])}, tau {list(input2.shape[:-1])} "
        f"and other {list(input3.shape[:-2])} must be equal",
    )
    return [input3.shape]


@register_kernel("aten::ormqr.out", shape=_ormqr_shape)
def ormqr(self, input2, input3, left, transpose, out):
    """``Q C``, ``Q^T C``, ``C Q`` or ``C Q^T`` for ``Q = H_1 ... H_k`` given by geqrf's reflectors
    (``self``, ``input2``) and ``C`` = ``input3``, applying one reflector at a time."""
    _ormqr_shape("aten::ormqr.out", self, input2, input3, left, transpose, out)
    k = input2.shape[-1]
    c = np.array(input3, dtype=np.float64)
    # Q C applies H_k first; Q^T C and C Q apply H_1 first; C Q^T applies H_k first.
    order = range(k) if left == transpose else range(k - 1, -1, -1)
    with quiet():
        for i in order:
            v = np.array(self[..., :, i], dtype=np.float64)
            v[..., :i] = 0.0
            v[..., i] = 1.0
            tau = input2[..., i, None, None].astype(np.float64)
            if left:  # H C = C - tau v (v^T C)
                c -= tau * v[..., :, None] * np.einsum("...m,...mn->...n", v, c)[..., None, :]
            else:  # C H = C - tau (C v) v^T
                c -= tau * np.einsum("...mn,...n->...m", c, v)[..., :, None] * v[..., None, :]
    write_result(out, c)
