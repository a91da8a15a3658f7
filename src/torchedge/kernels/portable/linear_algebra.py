"""Matrix products through NumPy's BLAS-backed matmul: mm, bmm, addmm."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, result_type
from torchedge.kernels.portable.common import as_scalar, check, fail, finish, quiet
from torchedge.kernels.portable.shape_rules import broadcast_shapes
from torchedge.kernels.registry import register_kernel

__all__ = ["matmul_into", "product_shape", "mm", "bmm", "addmm"]


def matmul_into(a: np.ndarray, b: np.ndarray, out: np.ndarray, dtype) -> np.ndarray:
    """``a @ b`` computed in ``dtype`` (16-bit floats accumulate in float32).

    Returns the buffer holding the product: ``out`` itself when it is C-contiguous and of
    the accumulation dtype (BLAS writes straight into it), else a temporary that the
    caller hands to `finish` after any epilogue.
    """
    acc = accumulate_dtype(dtype)
    buf = out if out.dtype == acc and out.flags.c_contiguous else np.empty(out.shape, acc)
    with quiet():
        np.matmul(a, b, out=buf, dtype=acc, casting="unsafe")
    return buf


_F32 = np.dtype(np.float32)


def _plain_f32(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """float32 operands and a C-contiguous float32 out: BLAS writes the product straight into it."""
    return a.dtype == _F32 and b.dtype == _F32 and out.dtype == _F32 and out.flags.c_contiguous


def _check_matrices(op: str, a: np.ndarray, b: np.ndarray, ndim: int) -> None:
    if a.ndim != ndim or b.ndim != ndim:
        fail(op, f"expected {ndim}-D tensors, got shapes {list(a.shape)} and {list(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        fail(op, f"shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied")


def product_shape(op: str, a: tuple, b: tuple, ndim: int) -> tuple:
    """The shape of ``a @ b`` for two ``ndim``-D operands (bmm: equal batch sizes)."""
    check(len(a) == ndim and len(b) == ndim, op, f"expected {ndim}-D tensors, got shapes {list(a)} and {list(b)}")
    check(a[-1] == b[-2] and a[:-2] == b[:-2], op, f"shapes {list(a)} and {list(b)} cannot be multiplied")
    return a[:-1] + b[-1:]


def _mm_shape(op: str, self, mat2, out) -> list[tuple]:
    return [product_shape(op, self.shape, mat2.shape, 2)]


@register_kernel("aten::mm.out", shape=_mm_shape)
def mm(self, mat2, out):
    _check_matrices("aten::mm.out", self, mat2, 2)
    if _plain_f32(self, mat2, out):
        np.matmul(self, mat2, out=out)
        return
    finish(out, matmul_into(self, mat2, out, result_type(self, mat2)))


def _bmm_shape(op: str, self, mat2, out) -> list[tuple]:
    return [product_shape(op, self.shape, mat2.shape, 3)]


@register_kernel("aten::bmm.out", shape=_bmm_shape)
def bmm(self, mat2, out):
    _check_matrices("aten::bmm.out", self, mat2, 3)
    check(self.shape[0] == mat2.shape[0], "aten::bmm.out", f"batch sizes differ: {self.shape[0]} and {mat2.shape[0]}")
    if _plain_f32(self, mat2, out):
        np.matmul(self, mat2, out=out)
        return
    finish(out, matmul_into(self, mat2, out, result_type(self, mat2)))


def _addmm_shape(op: str, self, mat1, mat2, beta, alpha, out) -> list[tuple]:
    """``beta * self + alpha * (mat1 @ mat2)``: self broadcasts to the product's shape."""
    shape = product_shape(op, mat1.shape, mat2.shape, 2)
    check(
        broadcast_shapes(op, self.shape, shape) == shape,
        op,
        f"self of shape {list(self.shape)} cannot be broadcast to the product's shape {list(shape)}",
    )
    return [shape]


@register_kernel("aten::addmm.out", shape=_addmm_shape)
def addmm(self, mat1, mat2, beta, alpha, out):
    """``beta * self + alpha * (mat1 @ mat2)``; with beta == 0, self is ignored (even nan)."""
    _check_matrices("aten::addmm.out", mat1, mat2, 2)
    if beta == 1 and alpha == 1 and _plain_f32(mat1, mat2, out) and self.dtype == _F32:
        np.matmul(mat1, mat2, out=out)
        with quiet():
            np.add(out, self, out=out)
        return
    buf = matmul_into(mat1, mat2, out, result_type(mat1, mat2))
    with quiet():
        if alpha != 1:
            buf *= as_scalar(alpha, buf.dtype)
        if beta != 0:
            bias = self if beta == 1 else np.multiply(self, as_scalar(beta, buf.dtype), dtype=buf.dtype)
            np.add(buf, bias, out=buf, casting="unsafe")
    finish(out, buf)
