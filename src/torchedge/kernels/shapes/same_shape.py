"""Operators whose every output has the shape of one input: copies and casts, scans,
orderings, in-place-style updates (scatters, index_put), and the gradients of pooling
(shaped like the pooled input).
"""

from __future__ import annotations

from torchedge.kernels.shapes.common import broadcast_shapes, check
from torchedge.kernels.shapes.registry import register_named

__all__ = ["same_as", "copy", "masked_scatter"]

# op names, the position of the input whose shape every output takes, number of outs
_SAME_AS = [
    # copies and casts
    (("aten::clone.out", "aten::alias_copy.out", "aten::_to_copy.out", "dim_order_ops::_to_dim_order_copy.out",
      "dim_order_ops::_clone_dim_order.out", "aten::fill.Scalar_out", "aten::full_like.out"), 0, 1),
    # along a dim: normalised, scanned, flipped, rolled, masked, ordered, transformed
    (("aten::_softmax.out", "aten::_log_softmax.out", "aten::cumsum.out", "aten::flip.out", "aten::roll.out",
      "aten::tril.out", "aten::argsort.stable_out", "aten::_fft_c2c.out"), 0, 1),
    # two outs: sorted values and their indices; dropout's output and mask
    (("aten::sort.values", "aten::sort.values_stable", "aten::native_dropout.out"), 0, 2),
    # self with some elements replaced
    (("aten::scatter.src_out", "aten::scatter.value_out", "aten::scatter.reduce_out", "aten::scatter.value_reduce_out",
      "aten::scatter_add.out", "aten::scatter_reduce.two_out", "aten::index_put.out", "aten::select_scatter.out",
      "aten::slice_scatter.out", "aten::index_put_"), 0, 1),
    # pooling gradients (grad_output, self, ...): shaped like the pooled input
    (("aten::avg_pool2d_backward.grad_input", "aten::avg_pool3d_backward.grad_input",
      "aten::max_pool2d_with_indices_backward.grad_input", "aten::max_pool3d_with_indices_backward.grad_input",
      "aten::_adaptive_avg_pool2d_backward.out", "aten::_adaptive_avg_pool3d_backward.out"), 1, 1),
    # (de)quantized copies
    (tuple(f"quantized_decomposed::{name}" for name in (
        "quantize_per_tensor.out", "quantize_per_tensor.Tensor_out", "dequantize_per_tensor.out",
        "dequantize_per_tensor.Tensor_out", "quantize_per_channel.out", "dequantize_per_channel.out")), 0, 1),
]


def same_as(op: str, position: int, outs: int, *args) -> list[tuple]:
    return [args[position].shape] * outs


for _names, _position, _outs in _SAME_AS:
    register_named(*_names, bind=(_position, _outs))(same_as)


@register_named("aten::copy.out", "aten::copy_")
def copy(op: str, self, src, non_blocking, out=None) -> list[tuple]:
    """``self`` with ``src`` broadcast into it (in place for ``copy_``, which has no out)."""
    check(broadcast_shapes(op, self.shape, src.shape) == self.shape, op,
          f"src of shape {list(src.shape)} cannot be broadcast to self's shape {list(self.shape)}")
    return [self.shape]


@register_named("aten::masked_scatter.out")
def masked_scatter(op: str, self, mask, source, out) -> list[tuple]:
    """self and mask broadcast; source only supplies elements."""
    return [broadcast_shapes(op, self.shape, mask.shape)]
