"""Reductions (the reduced dims dropped, or kept as 1 with keepdim) and topk."""

from __future__ import annotations

from torchedge.kernels.shapes.common import check, reduced, replaced, wrap_dim
from torchedge.kernels.shapes.registry import register_named

__all__ = ["reduction", "any_dims", "topk"]

# op names, where dim and keepdim stand among the arguments after self (None: the op
# reduces every dim), number of outs. A dim is an int, a list (None or [] is every dim),
# or None (argmax, argmin: the flattened tensor).
_REDUCTIONS = [
    (("aten::amax.out", "aten::amin.out", "aten::any.out", "aten::argmax.out", "aten::argmin.out",
      "aten::sum.IntList_out", "aten::mean.out", "aten::prod.int_out"), 0, 1, 1),
    (("aten::var.correction_out", "aten::var.out", "aten::std.correction_out", "aten::std.out"), 0, 2, 1),
    (("aten::max.dim_max", "aten::min.dim_min"), 0, 1, 2),  # values and indices
    (("aten::any.all_out", "aten::max.unary_out", "aten::min.unary_out", "aten::mean.dtype_out", "aten::prod.out"),
     None, None, 1),
]


def reduction(op: str, dim_at, keepdim_at, outs: int, self, *rest) -> list[tuple]:
    if dim_at is None:
        return [()] * outs
    return [reduced(op, self.shape, rest[dim_at], rest[keepdim_at])] * outs


for _names, _dim_at, _keepdim_at, _outs in _REDUCTIONS:
    register_named(*_names, bind=(_dim_at, _keepdim_at, _outs))(reduction)


@register_named("aten::any.dims_out")
def any_dims(op: str, self, dim, keepdim, out) -> list[tuple]:
    """Unlike sum's, an empty dim list reduces nothing (None reduces every dim)."""
    if dim is not None and len(dim) == 0:
        return [self.shape]
    return [reduced(op, self.shape, dim, keepdim)]


@register_named("aten::topk.values")
def topk(op: str, self, k, dim, largest, sorted, values, indices) -> list[tuple]:
    """self with dim ``dim`` cut to its k largest (or smallest) entries."""
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis] if self.ndim else 1
    check(0 <= k <= size, op, f"k ({k}) is out of range for dimension {dim} of size {size}")
    shape = replaced(self.shape, axis, k) if self.ndim else ()
    return [shape, shape]


@register_named("quantized_decomposed::choose_qparams.Tensor_out")
def choose_qparams(op: str, input, quant_min, quant_max, eps, dtype, scale_out, zero_point_out) -> list[tuple]:
    """One scale and one zero point for the whole input."""
    return [(1,), (1,)]
