"""Helpers of the linalg kernels: input checks, LU with partial pivoting, triangular solves.

The loops here run over the columns of a matrix (LAPACK's unblocked algorithms, one vectorized
NumPy step per column for the whole batch), never over elements. Real float32 and float64 compute
in float64 and round once into ``out``; integer inputs are refused, as in ATen, and complex
inputs are not supported yet.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.portable.common import check, fail

__all__ = [
    "check_float_matrix",
    "check_square",
    "broadcast_batch",
    "lu_factor",
    "lu_permutation",
    "triangular_solve",
    "lu_solve",
    "write_result",
]


def check_float_matrix(op: str, name: str, x: np.ndarray, min_ndim: int = 2) -> None:
    """A real float32/float64 tensor of at least ``min_ndim`` dims (integers refused as in ATen)."""
    if x.dtype.kind == "c":
        fail(op, f"complex {name} ({x.dtype}) is not supported by the portable kernels yet")
    check(
        x.dtype in (np.float32, np.float64),
        op,
        f"expected a floating point tensor ({name}) of dtype float32 or float64, got {x.dtype}",
    )
    check(x.ndim >= min_ndim, op, f"{name} must have at least {min_ndim} dimensions, got {x.ndim}")


def check_square(op: str, name: str, x: np.ndarray) -> None:
    check_float_matrix(op, name, x)
    check(
        x.shape[-1] == x.shape[-2],
        op,
        f"{name} must be batches of square matrices, but they are {x.shape[-2]} by {x.shape[-1]} matrices",
    )


def broadcast_batch(op: str, *shapes: tuple) -> tuple:
    """The broadcast of the batch shapes (everything but the last two dims) of ``shapes``."""
    try:
        return tuple(np.broadcast_shapes(*(tuple(s[:-2]) for s in shapes)))
    except ValueError:
        fail(op, f"the batch dimensions of {[list(s) for s in shapes]} do not broadcast")


def lu_factor(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LU with partial pivoting of ``a`` (..., m, n) as LAPACK's getrf computes it.

    Returns the packed ``LU`` (float64), the 1-based ``pivots`` (int32, (..., min(m, n))) and
    ``info`` (int32, (...)): the 1-based index of the first exactly zero pivot, else 0."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    count = math.prod(batch)
    lu = np.array(a, dtype=np.float64).reshape(count, m, n)
    rows = np.arange(count)
    pivots = np.empty((count, k), np.int32)
    info = np.zeros(count, np.int32)
    for j in range(k):
        p = j + np.argmax(np.abs(lu[:, j:, j]), axis=-1)
        pivots[:, j] = p + 1
        top = lu[rows, j].copy()
        lu[rows, j] = lu[rows, p]
        lu[rows, p] = top
        pivot = lu[:, j, j]
        zero = pivot == 0
        info[(info == 0) & zero] = j + 1
        lu[:, j + 1 :, j] /= np.where(zero, 1.0, pivot)[:, None]
        lu[:, j + 1 :, j + 1 :] -= lu[:, j + 1 :, j, None] * lu[:, j, None, j + 1 :]
    return lu.reshape(*batch, m, n), pivots.reshape(*batch, k), info.reshape(batch)


def lu_permutation(pivots: np.ndarray, m: int) -> np.ndarray:
    """The row order ``perm`` with ``P^T A = A[perm]`` for LAPACK's 1-based row swaps ``pivots``."""
    batch = pivots.shape[:-1]
    piv = pivots.reshape(math.prod(batch), pivots.shape[-1]).astype(np.int64) - 1
    perm = np.broadcast_to(np.arange(m), (piv.shape[0], m)).copy()
    rows = np.arange(piv.shape[0])
    for i in range(piv.shape[-1]):
        target = piv[:, i]
        here = perm[:, i].copy()
        perm[:, i] = perm[rows, target]
        perm[rows, target] = here
    return perm.reshape(*batch, m)


def triangular_solve(t: np.ndarray, b: np.ndarray, upper: bool, unit: bool) -> np.ndarray:
    """``X`` with ``T X = B`` for triangular ``T`` (..., n, n) and ``B`` (..., n, k), batches
    broadcast; only ``T``'s triangle is read. A zero diagonal gives inf/nan, as LAPACK's trsm."""
    n = t.shape[-1]
    batch = np.broadcast_shapes(t.shape[:-2], b.shape[:-2])
    t = np.broadcast_to(t, batch + t.shape[-2:])
    x = np.array(np.broadcast_to(b, batch + b.shape[-2:]), dtype=np.float64)
    order = range(n - 1, -1, -1) if upper else range(n)
    for i in order:
        done = slice(i + 1, n) if upper else slice(0, i)
        row = x[..., i, :] - np.einsum("...j,...jk->...k", t[..., i, done], x[..., done, :])
        x[..., i, :] = row if unit else row / t[..., i, i, None]
    return x


def lu_solve(lu: np.ndarray, pivots: np.ndarray, b: np.ndarray, adjoint: bool = False) -> np.ndarray:
    """``X`` with ``A X = B`` (``A^T X = B`` when ``adjoint``) for ``A = P L U`` packed in ``lu``."""
    n = lu.shape[-1]
    batch = np.broadcast_shapes(lu.shape[:-2], b.shape[:-2], pivots.shape[:-1])
    perm = np.broadcast_to(lu_permutation(pivots, n), batch + (n,))
    b = np.broadcast_to(b, batch + b.shape[-2:])
    if not adjoint:
        x = np.take_along_axis(b, perm[..., None], axis=-2)
        x = triangular_solve(lu, x, upper=False, unit=True)
        return triangular_solve(lu, x, upper=True, unit=False)
    lu_t = np.swapaxes(lu, -1, -2)
    y = triangular_solve(lu_t, b, upper=False, unit=False)
    z = triangular_solve(lu_t, y, upper=True, unit=True)
    x = np.empty_like(z)
    np.put_along_axis(x, perm[..., None], z, axis=-2)
    return x


def write_result(out: np.ndarray, value: np.ndarray) -> None:
    """Round a float64 result once into ``out``."""
    np.copyto(out, value, casting="unsafe")
