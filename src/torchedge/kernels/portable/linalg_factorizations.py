"""Factorizations of the torch.linalg family: cholesky_ex, qr, svd, eigh, pinv, matrix_exp and
householder_product (real float32/float64; computed in float64 and rounded once into ``out``).

Signs: ``qr`` calls LAPACK's geqrf/orgqr through NumPy, as eager does, so Q and R match eager.
Singular vectors and eigenvectors are unique only up to sign, and LAPACK builds (eager's and
NumPy's) choose different signs, so no kernel can reproduce eager's choice: these kernels make the
entry of largest magnitude of every column of ``U`` (``eigh``: of every eigenvector) positive
(``Vh``'s rows flip with ``U``'s columns). Values (S, eigenvalues), reconstructions and everything
built on them (svdvals, matrix_norm 2/nuc, cond, matrix_rank, pinv, eigvalsh) match eager.

``matrix_exp`` is accurate to the last bit of float32, while eager's float32 kernel (a degree-8
polynomial for 1-norms in about (0.05, 0.6]) is off by up to 4e-5 relative there.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.portable.common import check, fail, quiet
from torchedge.kernels.portable.linalg_common import check_float_matrix, check_square, write_result
from torchedge.kernels.portable.linalg_solvers import raise_for_info
from torchedge.kernels.registry import register_kernel

__all__ = [
    "linalg_cholesky_ex",
    "linalg_qr",
    "linalg_svd",
    "linalg_eigh",
    "linalg_eig",
    "linalg_pinv",
    "linalg_matrix_exp",
    "linalg_householder_product",
]


def _numpy_linalg(op: str, fn, *args, **kwargs):
    try:
        with quiet():
            return fn(*args, **kwargs)
    except np.linalg.LinAlgError as e:
        fail(op, f"the algorithm failed to converge ({e}); the input may hold inf or nan")


def _positive_columns(vectors: np.ndarray) -> np.ndarray:
    """The sign (+1/-1) per column that makes each column's largest-magnitude entry positive."""
    if vectors.shape[-2] == 0:
        return np.ones(vectors.shape[:-2] + vectors.shape[-1:])
    top = np.argmax(np.abs(vectors), axis=-2)[..., None, :]
    return np.where(np.take_along_axis(vectors, top, axis=-2) < 0, -1.0, 1.0)[..., 0, :]


def _cholesky_shapes(op: str, self, upper, check_errors, L, info) -> list[tuple]:
    check_square(op, "A", self)
    return [self.shape, self.shape[:-2]]


@register_kernel("aten::linalg_cholesky_ex.L", shape=_cholesky_shapes)
def linalg_cholesky_ex(self, upper, check_errors, L, info):
    """Left-looking Cholesky (LAPACK's potf2): a batch element stops at its first non-positive
    pivot, which it stores with the columns after it left as the input's, like eager."""
    op = "aten::linalg_cholesky_ex.L"
    check_square(op, "A", self)
    n = self.shape[-1]
    a = np.array(np.swapaxes(self, -1, -2) if upper else self, dtype=np.float64).reshape(
        math.prod(self.shape[:-2]), n, n
    )
    codes = np.zeros(a.shape[0], np.int32)
    active = np.ones(a.shape[0], bool)
    with quiet():
        for j in range(n):
            pivot = a[:, j, j] - np.einsum("bk,bk->b", a[:, j, :j], a[:, j, :j])
            failed = active & ~(pivot > 0)
            codes[failed] = j + 1
            a[failed, j, j] = pivot[failed]
            active &= ~failed
            root = np.sqrt(np.where(active, pivot, 1.0))
            below = (a[:, j + 1 :, j] - np.einsum("bik,bk->bi", a[:, j + 1 :, :j], a[:, j, :j])) / root[:, None]
            a[active, j, j] = root[active]
            a[active, j + 1 :, j] = below[active]
    lower = np.tril(a).reshape(self.shape)
    codes = codes.reshape(self.shape[:-2])
    if check_errors:
        raise_for_info(op, "linalg.cholesky_ex", codes, self.ndim == 2)
    write_result(L, np.swapaxes(lower, -1, -2) if upper else lower)
    write_result(info, codes)


_QR_MODES = ("reduced", "complete", "r")


def _qr_shapes(op: str, A, mode, Q, R) -> list[tuple]:
    check_float_matrix(op, "A", A)
    check(mode in _QR_MODES, op, f"unrecognized mode '{mode}': expected one of {', '.join(map(repr, _QR_MODES))}")
    batch, (m, n) = A.shape[:-2], A.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    q = (0,) if mode == "r" else batch + (m, k)
    return [q, batch + (k, n)]


@register_kernel("aten::linalg_qr.out", shape=_qr_shapes)
def linalg_qr(A, mode, Q, R):
    op = "aten::linalg_qr.out"
    _qr_shapes(op, A, mode, Q, R)
    a = A.astype(np.float64)
    if A.size == 0:
        q, r = _empty_qr(a, mode)
    elif mode == "r":
        q, r = None, _numpy_linalg(op, np.linalg.qr, a, mode="r")
    else:
        q, r = _numpy_linalg(op, np.linalg.qr, a, mode=mode)
    if q is not None:
        write_result(Q, q)
    write_result(R, r)


def _empty_qr(a: np.ndarray, mode: str):
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    q = None if mode == "r" else np.broadcast_to(np.eye(m, k), batch + (m, k))
    return q, np.zeros(batch + (k, n))


def _svd_shapes(op: str, A, full_matrices, compute_uv, driver, U, S, Vh) -> list[tuple]:
    check_float_matrix(op, "A", A)
    check(driver is None, op, "the driver= argument is only supported on CUDA inputs")
    batch, (m, n) = A.shape[:-2], A.shape[-2:]
    k = min(m, n)
    if not compute_uv:
        return [(0,), batch + (k,), (0,)]
    if full_matrices:
        return [batch + (m, m), batch + (k,), batch + (n, n)]
    return [batch + (m, k), batch + (k,), batch + (k, n)]


@register_kernel("aten::_linalg_svd.U", shape=_svd_shapes)
def linalg_svd(A, full_matrices, compute_uv, driver, U, S, Vh):
    op = "aten::_linalg_svd.U"
    _svd_shapes(op, A, full_matrices, compute_uv, driver, U, S, Vh)
    a = A.astype(np.float64)
    batch, (m, n) = A.shape[:-2], A.shape[-2:]
    k = min(m, n)
    if A.size == 0:
        u, s, vh = (
            np.broadcast_to(np.eye(m, m if full_matrices else k), batch + (m, m if full_matrices else k)),
            np.zeros(batch + (k,)),
            np.broadcast_to(np.eye(n if full_matrices else k, n), batch + (n if full_matrices else k, n)),
        )
    elif not compute_uv:
        u, s, vh = None, _numpy_linalg(op, np.linalg.svd, a, compute_uv=False), None
    else:
        u, s, vh = _numpy_linalg(op, np.linalg.svd, a, full_matrices=full_matrices)
        signs = _positive_columns(u)
        u = u * signs[..., None, :]
        vh = vh.copy()
        vh[..., :k, :] *= signs[..., :k, None]
        if vh.shape[-2] > k:  # full_matrices, n > m: Vh's extra rows span the null space
            vh[..., k:, :] *= _positive_columns(np.swapaxes(vh[..., k:, :], -1, -2))[..., :, None]
    write_result(S, s)
    if compute_uv:
        write_result(U, u)
        write_result(Vh, vh)


def _eigh_shapes(op: str, A, UPLO, compute_v, eigenvalues, eigenvectors) -> list[tuple]:
    check_square(op, "A", A)
    check(UPLO in ("L", "U"), op, f"UPLO must be 'L' or 'U', got '{UPLO}'")
    return [A.shape[:-1], A.shape if compute_v else (0,)]


@register_kernel("aten::_linalg_eigh.eigenvalues", shape=_eigh_shapes)
def linalg_eigh(A, UPLO, compute_v, eigenvalues, eigenvectors):
    op = "aten::_linalg_eigh.eigenvalues"
    _eigh_shapes(op, A, UPLO, compute_v, eigenvalues, eigenvectors)
    a = A.astype(np.float64)
    if A.size == 0:
        write_result(eigenvalues, np.zeros(A.shape[:-1]))
        return
    if not compute_v:
        write_result(eigenvalues, _numpy_linalg(op, np.linalg.eigvalsh, a, UPLO=UPLO))
        return
    w, v = _numpy_linalg(op, np.linalg.eigh, a, UPLO=UPLO)
    write_result(eigenvalues, w)
    write_result(eigenvectors, v * _positive_columns(v)[..., None, :])


def _eig_shapes(op: str, A, eigenvalues, eigenvectors) -> list[tuple]:
    check_square(op, "A", A)
    return [A.shape[:-1], A.shape]


@register_kernel("aten::linalg_eig.out", shape=_eig_shapes)
def linalg_eig(A, eigenvalues, eigenvectors):
    """Eigenvalues and right eigenvectors of a general real matrix, complex (LAPACK's geev, as
    eager: each vector of unit norm with its largest component real, in geev's order)."""
    op = "aten::linalg_eig.out"
    _eig_shapes(op, A, eigenvalues, eigenvectors)
    if A.size == 0:
        return
    w, v = _numpy_linalg(op, np.linalg.eig, A.astype(np.float64))
    write_result(eigenvalues, w)
    write_result(eigenvectors, v)


def _pinv_shape(op: str, self, atol, rtol, hermitian, out) -> list[tuple]:
    check_float_matrix(op, "A", self)
    if hermitian:
        check_square(op, "A", self)
    return [self.shape[:-2] + (self.shape[-1], self.shape[-2])]


def _pinv(op: str, self, atol, rtol, hermitian, out) -> None:
    """ATen's rule: keep the singular values above max(atol, rtol * largest); rtol defaults to
    eps * max(m, n), or to 0 where a positive atol is given."""
    _pinv_shape(op, self, atol, rtol, hermitian, out)
    m, n = self.shape[-2:]
    if self.size == 0:
        write_result(out, np.zeros(out.shape))
        return
    a = self.astype(np.float64)
    default_rtol = np.finfo(self.dtype).eps * max(m, n)
    atol_v = np.zeros(()) if atol is None else np.asarray(atol, np.float64)
    if rtol is not None:
        rtol_v = np.asarray(rtol, np.float64)
    else:
        rtol_v = np.where(atol_v > 0, 0.0, default_rtol) if atol is not None else np.asarray(default_rtol)
    with quiet():
        if hermitian:
            s, u = _numpy_linalg(op, np.linalg.eigh, a)
            largest = np.max(np.abs(s), axis=-1)
            v, uh = u, np.swapaxes(u, -1, -2)
            keep_by = np.abs(s)
        else:
            u, s, vh = _numpy_linalg(op, np.linalg.svd, a, full_matrices=False)
            largest = s[..., 0]
            v, uh = np.swapaxes(vh, -1, -2), np.swapaxes(u, -1, -2)
            keep_by = s
        tol = np.maximum(atol_v, rtol_v * largest)[..., None]
        inverse = np.where(keep_by > tol, 1.0 / np.where(s == 0, 1.0, s), 0.0)
        write_result(out, (v * inverse[..., None, :]) @ uh)


@register_kernel("aten::linalg_pinv.atol_rtol_tensor_out", shape=_pinv_shape)
def linalg_pinv(self, atol, rtol, hermitian, out):
    _pinv("aten::linalg_pinv.atol_rtol_tensor_out", self, atol, rtol, hermitian, out)


@register_kernel("aten::linalg_pinv.atol_rtol_float_out", shape=_pinv_shape)
def linalg_pinv_float(self, atol, rtol, hermitian, out):
    _pinv("aten::linalg_pinv.atol_rtol_float_out", self, atol, rtol, hermitian, out)


# Padé [13/13] coefficients of exp (Higham, "The scaling and squaring method for the matrix
# exponential revisited", 2005) and the 1-norm bound up to which no scaling is needed.
_PADE13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
_THETA13 = 5.371920351148152


def _matrix_exp_shape(op: str, self, out) -> list[tuple]:
    check_square(op, "A", self)
    return [self.shape]


@register_kernel("aten::linalg_matrix_exp.out", shape=_matrix_exp_shape)
def linalg_matrix_exp(self, out):
    """Scaling and squaring with a Padé [13/13] approximant, in float64."""
    op = "aten::linalg_matrix_exp.out"
    check_square(op, "A", self)
    n = self.shape[-1]
    if self.size == 0:
        return
    a = self.astype(np.float64).reshape(-1, n, n)
    with quiet():
        norm = np.max(np.sum(np.abs(a), axis=-2), axis=-1)
        ratio = np.where(np.isfinite(norm), norm / _THETA13, 1.0)
        squarings = np.where(ratio > 1, np.ceil(np.log2(np.maximum(ratio, 1.0))), 0).astype(np.int64)
        a = a / np.ldexp(1.0, squarings)[:, None, None]
        b = _PADE13
        eye = np.eye(n)
        a2 = a @ a
        a4 = a2 @ a2
        a6 = a4 @ a2
        u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
        result = _solve_or_nan(v - u, v + u)
        for step in range(int(squarings.max(initial=0))):
            more = squarings > step
            result[more] = result[more] @ result[more]
    write_result(out, result.reshape(self.shape))


def _solve_or_nan(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``q^-1 p`` per batch element; nan where ``q`` is singular (a non-finite input)."""
    finite = np.all(np.isfinite(q), axis=(-2, -1)) & np.all(np.isfinite(p), axis=(-2, -1))
    result = np.full(p.shape, math.nan)
    if finite.any():
        result[finite] = np.linalg.solve(q[finite], p[finite])
    return result


def _householder_shape(op: str, input, tau, out) -> list[tuple]:
    check_float_matrix(op, "input", input)
    check_float_matrix(op, "tau", tau, min_ndim=1)
    check(input.dtype == tau.dtype, op, f"input ({input.dtype}) and tau ({tau.dtype}) must have the same dtype")
    check(input.shape[-2] >= input.shape[-1], op, "input.shape[-2] must be greater than or equal to input.shape[-1]")
    check(input.shape[-1] >= tau.shape[-1], op, "input.shape[-1] must be greater than or equal to tau.shape[-1]")
    check(
        tau.shape[:-1] == input.shape[:-2],
        op,
        f"the batch dimensions of tau {list(tau.shape[:-1])} must equal input's {list(input.shape[:-2])}",
    )
    return [input.shape]


@register_kernel("aten::linalg_householder_product.out", shape=_householder_shape)
def linalg_householder_product(input, tau, out):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T, as LAPACK's orgqr."""
    _householder_shape("aten::linalg_householder_product.out", input, tau, out)
    m, n = input.shape[-2:]
    q = np.array(np.broadcast_to(np.eye(m, n), input.shape), dtype=np.float64)
    with quiet():
        for i in range(tau.shape[-1] - 1, -1, -1):
            v = np.array(input[..., :, i], dtype=np.float64)
            v[..., :i] = 0.0
            v[..., i] = 1.0
            q -= tau[..., i, None, None] * v[..., :, None] * np.einsum("...m,...mn->...n", v, q)[..., None, :]
    write_result(out, q)
