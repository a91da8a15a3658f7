"""Matrix products (mm, bmm, addmm) and the pairwise distances cdist and pdist."""

from __future__ import annotations

from torchedge.kernels.shapes.common import broadcast_shapes, check
from torchedge.kernels.shapes.registry import register_named

__all__ = ["product", "mm", "bmm", "addmm", "cdist", "pdist"]


def product(op: str, a: tuple, b: tuple, ndim: int) -> tuple:
    """The shape of ``a @ b`` for two ``ndim``-D operands (bmm: equal batch sizes)."""
    check(len(a) == ndim and len(b) == ndim, op, f"expected {ndim}-D tensors, got shapes {list(a)} and {list(b)}")
    check(a[-1] == b[-2] and a[:-2] == b[:-2], op, f"shapes {list(a)} and {list(b)} cannot be multiplied")
    return a[:-1] + b[-1:]


@register_named("aten::mm.out")
def mm(op: str, self, mat2, out) -> list[tuple]:
    return [product(op, self.shape, mat2.shape, 2)]


@register_named("aten::bmm.out")
def bmm(op: str, self, mat2, out) -> list[tuple]:
    return [product(op, self.shape, mat2.shape, 3)]


@register_named("aten::addmm.out")
def addmm(op: str, self, mat1, mat2, beta, alpha, out) -> list[tuple]:
    """``beta * self + alpha * (mat1 @ mat2)``: self broadcasts to the product's shape."""
    shape = product(op, mat1.shape, mat2.shape, 2)
    check(broadcast_shapes(op, self.shape, shape) == shape, op,
          f"self of shape {list(self.shape)} cannot be broadcast to the product's shape {list(shape)}")
    return [shape]


@register_named("aten::_cdist_forward.out")
def cdist(op: str, x1, x2, p, compute_mode, out) -> list[tuple]:
    """Distances between the rows of x1 [..., P, M] and x2 [..., R, M]: [..., P, R], the
    batch dims broadcast."""
    check(x1.ndim >= 2 and x2.ndim >= 2 and x1.shape[-1] == x2.shape[-1], op,
          f"expects inputs of at least 2 dims with as many columns, got shapes {list(x1.shape)} and {list(x2.shape)}")
    return [broadcast_shapes(op, x1.shape[:-2], x2.shape[:-2]) + (x1.shape[-2], x2.shape[-2])]


@register_named("aten::_pdist_forward.out")
def pdist(op: str, self, p, out) -> list[tuple]:
    """One distance per pair of rows i < j."""
    check(self.ndim == 2, op, f"expects a 2-D input, got shape {list(self.shape)}")
    n = self.shape[0]
    return [(n * (n - 1) // 2,)]
