"""Products that add into a bias or contract three operands: ``addmv``, ``addbmm`` and
``_trilinear`` (what ``nn.functional.bilinear`` lowers to). ``addbmm`` and ``_trilinear``
refuse 16-bit floats (ATen rounds their partial products in its own order).

``beta * self + alpha * product``: as in ATen, beta == 0 ignores ``self`` (even NaN), the
operands share one dtype, and integer operands truncate a float alpha or beta.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, accumulate_dtype, is_floating
from torchedge.kernels.portable.common import as_scalar, check, fail, quiet, wrap_dim, write
from torchedge.kernels.portable.shape_rules import broadcast_shapes
from torchedge.kernels.registry import register_kernel

__all__ = ["addmv", "addbmm", "trilinear"]


def _check_operands(op: str, *tensors: np.ndarray) -> None:
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        check(t.dtype == dtype, op, f"expected all operands to have dtype {dtype}, got {t.dtype}")
    check(dtype != BOOL, op, "boolean operands are not supported")


def _check_not_half(op: str, dtype: np.dtype) -> None:
    """ATen rounds 16-bit float partial products to the dtype in an order not reproduced here."""
    check(not (is_floating(dtype) and dtype.itemsize < 4), op, f"16-bit float operands ({dtype}) are not supported")


def _bias(op: str, self: np.ndarray, product: np.ndarray, beta, alpha, out: np.ndarray) -> None:
    """``beta * self + alpha * product`` into ``out``, in the accumulation dtype."""
    acc = product.dtype
    with quiet():
        if alpha != 1:
            product = product * as_scalar(alpha, acc)
        if beta != 0:
            bias = self.astype(acc) if beta == 1 else np.multiply(self, as_scalar(beta, acc), dtype=acc)
            product = product + bias
    write(out, np.broadcast_to(product, out.shape))


def _check_bias(op: str, self_shape: tuple, shape: tuple) -> tuple:
    check(
        broadcast_shapes(op, self_shape, shape) == shape,
        op,
        f"self of shape {list(self_shape)} cannot be broadcast to the product's shape {list(shape)}",
    )
    return shape


def _addmv_shape(op: str, self, mat, vec, beta, alpha, out) -> list[tuple]:
    check(mat.ndim == 2 and vec.ndim == 1, op, f"expected a matrix and a vector, got {mat.ndim}-D and {vec.ndim}-D")
    check(mat.shape[1] == vec.shape[0], op, f"size mismatch, got mat {list(mat.shape)} and vec {list(vec.shape)}")
    return [_check_bias(op, self.shape, (mat.shape[0],))]


@register_kernel("aten::addmv.out", shape=_addmv_shape)
def addmv(self, mat, vec, beta, alpha, out):
    op = "aten::addmv.out"
    (shape,) = _addmv_shape(op, self, mat, vec, beta, alpha, out)
    _check_operands(op, self, mat, vec)
    acc = accumulate_dtype(mat.dtype)
    with quiet():
        product = np.matmul(mat.astype(acc, copy=False), vec.astype(acc, copy=False))
    _bias(op, self, product, beta, alpha, out)


def _addbmm_shape(op: str, self, batch1, batch2, beta, alpha, out) -> list[tuple]:
    check(
        batch1.ndim == 3 and batch2.ndim == 3,
        op,
        f"batch1 and batch2 must be 3-D, got {batch1.ndim}-D and {batch2.ndim}-D",
    )
    check(
        batch1.shape[0] == batch2.shape[0] and batch1.shape[2] == batch2.shape[1],
        op,
        f"batch1 {list(batch1.shape)} and batch2 {list(batch2.shape)} cannot be multiplied",
    )
    return [_check_bias(op, self.shape, (batch1.shape[1], batch2.shape[2]))]


@register_kernel("aten::addbmm.out", shape=_addbmm_shape)
def addbmm(self, batch1, batch2, beta, alpha, out):
    op = "aten::addbmm.out"
    _addbmm_shape(op, self, batch1, batch2, beta, alpha, out)
    _check_operands(op, self, batch1, batch2)
    _check_not_half(op, batch1.dtype)
    acc = accumulate_dtype(batch1.dtype)
    with quiet():
        product = np.matmul(batch1.astype(acc, copy=False), batch2.astype(acc, copy=False)).sum(axis=0, dtype=acc)
    _bias(op, self, product, beta, alpha, out)


def _check_expanded(op: str, ndim: int, expand, total: int) -> None:
    if ndim + len(expand) != total:
        fail(op, "the three operands must have equally many dims once expanded")


def _expanded(op: str, t: np.ndarray, expand, total: int) -> np.ndarray:
    _check_expanded(op, t.ndim, expand, total)
    for d in expand:
        t = np.expand_dims(t, d)
    return t


def _trilinear_parts(op: str, i1, i2, i3, expand1, expand2, expand3, sumdim):
    total = i1.ndim + len(expand1)
    parts = [_expanded(op, t, e, total) for t, e in ((i1, expand1), (i2, expand2), (i3, expand3))]
    broadcast_shapes(op, *(p.shape for p in parts))  # the shape function's check
    axes = sorted({wrap_dim(d, total, op) for d in sumdim})
    return parts, total, axes


def _trilinear_shape(op: str, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim, out) -> list[tuple]:
    total = i1.ndim + len(expand1)
    shapes = []
    for t, e in ((i1, expand1), (i2, expand2), (i3, expand3)):
        shape = list(t.shape)
        _check_expanded(op, len(shape), e, total)
        for d in e:
            shape.insert(d, 1)
        shapes.append(shape)
    full = broadcast_shapes(op, *[tuple(s) for s in shapes])
    axes = {wrap_dim(d, total, op) for d in sumdim}
    return [tuple(s for a, s in enumerate(full) if a not in axes)]


@register_kernel("aten::_trilinear.out", shape=_trilinear_shape)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim, out):
    """``(i1 * i2 * i3).sum(sumdim)`` with each operand unsqueezed at its ``expand`` dims."""
    op = "aten::_trilinear.out"
    _check_operands(op, i1, i2, i3)
    _check_not_half(op, i1.dtype)
    parts, _, axes = _trilinear_parts(op, i1, i2, i3, expand1, expand2, expand3, sumdim)
    acc = accumulate_dtype(i1.dtype)
    a, b, c = (p.astype(acc, copy=False) for p in parts)
    with quiet():
        result = (a * b * c).sum(axis=tuple(axes), dtype=acc) if axes else a * b * c
    write(out, result)
