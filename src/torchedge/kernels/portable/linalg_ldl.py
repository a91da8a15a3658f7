"""LDL^T of symmetric matrices: ``linalg_ldl_factor_ex`` and ``linalg_ldl_solve``.

Bunch-Kaufman diagonal pivoting on the lower triangle, as LAPACK's sytf2/sytrs compute it (the
same 1x1 and 2x2 pivot choices and pivot codes as eager: a 1-based row ``p`` for a 1x1 block,
``-p`` twice for a 2x2 block). The pivot choices differ from matrix to matrix, so the loop runs
over the matrices of a batch and, inside one, over its columns (each step a vector operation).
Real float32/float64 only, computed in float64.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.portable.common import check, quiet
from torchedge.kernels.portable.linalg_common import broadcast_batch, check_float_matrix, check_square, write_result
from torchedge.kernels.portable.linalg_solvers import raise_for_info
from torchedge.kernels.registry import register_kernel

__all__ = ["linalg_ldl_factor_ex", "linalg_ldl_solve"]

_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0  # Bunch-Kaufman's growth bound


def _pivot(a: np.ndarray, k: int) -> tuple[int, int]:
    """(kp, kstep) of Bunch-Kaufman's choice at column ``k``; kp == -1 for a zero column."""
    n = a.shape[0]
    absakk = abs(a[k, k])
    imax, colmax = k, 0.0
    if k < n - 1:
        imax = k + 1 + int(np.argmax(np.abs(a[k + 1 :, k])))
        colmax = abs(a[imax, k])
    if max(absakk, colmax) == 0 or math.isnan(absakk):
        return -1, 1
    if absakk >= _ALPHA * colmax:
        return k, 1
    rowmax = float(np.max(np.abs(a[imax, k:imax])))
    if imax < n - 1:
        rowmax = max(rowmax, float(np.max(np.abs(a[imax + 1 :, imax]))))
    if absakk >= _ALPHA * colmax * (colmax / rowmax):
        return k, 1
    if abs(a[imax, imax]) >= _ALPHA * rowmax:
        return imax, 1
    return imax, 2


def _swap_symmetric(a: np.ndarray, k: int, kk: int, kp: int, kstep: int) -> None:
    """Exchange rows and columns kk and kp of the trailing lower triangle."""
    a[kp + 1 :, [kk, kp]] = a[kp + 1 :, [kp, kk]]
    column = a[kk + 1 : kp, kk].copy()
    a[kk + 1 : kp, kk] = a[kp, kk + 1 : kp]
    a[kp, kk + 1 : kp] = column
    a[[kk, kp], [kk, kp]] = a[[kp, kk], [kp, kk]]
    if kstep == 2:
        a[[k + 1, kp], k] = a[[kp, k + 1], k]


def _factor(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """sytf2 on the lower triangle of one matrix (float64, updated in place)."""
    n = a.shape[0]
    pivots = np.zeros(n, np.int32)
    info, k = 0, 0
    while k < n:
        kp, kstep = _pivot(a, k)
        if kp < 0:
            info = info or k + 1
            kp = k
        else:
            kk = k + kstep - 1
            if kp != kk:
                _swap_symmetric(a, k, kk, kp, kstep)
            if kstep == 1 and k < n - 1:
                d11 = 1.0 / a[k, k]  # as sytf2: a reciprocal, then a rank-1 update and a scaling
                a[k + 1 :, k + 1 :] -= d11 * np.outer(a[k + 1 :, k], a[k + 1 :, k])
                a[k + 1 :, k] *= d11
            elif kstep == 2 and k < n - 2:
                d21 = a[k + 1, k]
                d11, d22 = a[k + 1, k + 1] / d21, a[k, k] / d21
                d21 = 1.0 / (d11 * d22 - 1.0) / d21
                ck, ck1 = a[k + 2 :, k].copy(), a[k + 2 :, k + 1].copy()
                wk, wk1 = d21 * (d11 * ck - ck1), d21 * (d22 * ck1 - ck)
                a[k + 2 :, k + 2 :] -= np.outer(ck, wk) + np.outer(ck1, wk1)
                a[k + 2 :, k], a[k + 2 :, k + 1] = wk, wk1
        pivots[k : k + kstep] = kp + 1 if kstep == 1 else -(kp + 1)
        k += kstep
    return np.tril(a), pivots, info


def _ldl_factor_shapes(op: str, self, hermitian, check_errors, LD, pivots, info) -> list[tuple]:
    check_square(op, "A", self)
    return [self.shape, self.shape[:-1], self.shape[:-2]]


@register_kernel("aten::linalg_ldl_factor_ex.out", shape=_ldl_factor_shapes)
def linalg_ldl_factor_ex(self, hermitian, check_errors, LD, pivots, info):
    op = "aten::linalg_ldl_factor_ex.out"
    check_square(op, "A", self)
    n = self.shape[-1]
    matrices = np.array(self, dtype=np.float64).reshape(math.prod(self.shape[:-2]), n, n)
    factors = np.empty_like(matrices)
    piv = np.empty(matrices.shape[:-1], np.int32)
    codes = np.zeros(matrices.shape[0], np.int32)
    with quiet():
        for b in range(matrices.shape[0]):
            factors[b], piv[b], codes[b] = _factor(matrices[b])
    codes = codes.reshape(self.shape[:-2])
    if check_errors:
        raise_for_info(op, "torch.linalg.ldl_factor_ex", codes, self.ndim == 2)
    write_result(LD, factors.reshape(self.shape))
    write_result(pivots, piv.reshape(self.shape[:-1]))
    write_result(info, codes)


def _solve_one(ld: np.ndarray, pivots: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sytrs (lower): X with L D L^T X = P B for one factored matrix; ``b`` is updated in place."""
    n = ld.shape[0]
    k = 0
    while k < n:  # L D Y = B
        if pivots[k] > 0:
            kp = pivots[k] - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1 :] -= np.outer(ld[k + 1 :, k], b[k])
            b[k] /= ld[k, k]
            k += 1
            continue
        kp = -pivots[k] - 1
        b[[k + 1, kp]] = b[[kp, k + 1]]
        b[k + 2 :] -= np.outer(ld[k + 2 :, k], b[k]) + np.outer(ld[k + 2 :, k + 1], b[k + 1])
        offdiag = ld[k + 1, k]
        akm1, ak = ld[k, k] / offdiag, ld[k + 1, k + 1] / offdiag
        denom = akm1 * ak - 1.0
        bkm1, bk = b[k] / offdiag, b[k + 1] / offdiag
        b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
        k += 2
    k = n - 1
    while k >= 0:  # L^T X = Y
        b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
        if pivots[k] > 0:
            kp = pivots[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
            continue
        b[k - 1] -= ld[k + 1 :, k - 1] @ b[k + 1 :]
        kp = -pivots[k] - 1
        b[[k, kp]] = b[[kp, k]]
        k -= 2
    return b


def _ldl_solve_shape(op: str, LD, pivots, B, hermitian, out) -> list[tuple]:
    check_square(op, "LD", LD)
    check_float_matrix(op, "B", B)
    check(LD.dtype == B.dtype, op, f"B ({B.dtype}) and LD ({LD.dtype}) must have the same dtype")
    check(pivots.dtype.kind in "iu", op, f"pivots must be an integer tensor, got {pivots.dtype}")
    check(pivots.shape == LD.shape[:-1], op, f"pivots {list(pivots.shape)} do not match LD {list(LD.shape)}")
    check(B.shape[-2] == LD.shape[-1], op, f"incompatible shapes of LD {list(LD.shape)} and B {list(B.shape)}")
    return [broadcast_batch(op, LD.shape, B.shape) + B.shape[-2:]]


@register_kernel("aten::linalg_ldl_solve.out", shape=_ldl_solve_shape)
def linalg_ldl_solve(LD, pivots, B, hermitian, out):
    op = "aten::linalg_ldl_solve.out"
    (shape,) = _ldl_solve_shape(op, LD, pivots, B, hermitian, out)
    n = LD.shape[-1]
    check(bool(np.all((np.abs(pivots) >= 1) & (np.abs(pivots) <= n))), op, f"pivots must lie in [-{n}, -1] or [1, {n}]")
    batch = shape[:-2]
    count = math.prod(batch)
    lds = np.broadcast_to(LD, batch + LD.shape[-2:]).reshape(count, n, n)
    pivs = np.broadcast_to(pivots, batch + pivots.shape[-1:]).reshape(count, n).astype(np.int64)
    x = np.array(np.broadcast_to(B, shape), dtype=np.float64).reshape(count, *shape[-2:])
    with quiet():
        for b in range(x.shape[0]):
            _solve_one(lds[b], pivs[b], x[b])
    write_result(out, x.reshape(shape))
