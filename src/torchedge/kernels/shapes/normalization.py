"""Batch, layer and group norm with their saved statistics, and the norms' backward."""

from __future__ import annotations

from torchedge.kernels.shapes.common import check, masked
from torchedge.kernels.shapes.registry import register_named

__all__ = ["batch_norm", "batch_norm_no_training", "batch_norm_no_stats", "layer_norm", "group_norm",
           "layer_norm_backward", "group_norm_backward"]


def _batch_norm(op: str, input, training: bool) -> list[tuple]:
    """The output and the saved mean and invstd: one per channel (dim 1) in training,
    empty in inference (as in ATen)."""
    check(input.ndim >= 2, op, f"expected an input with a channel dim, got shape {list(input.shape)}")
    stats = (input.shape[1],) if training else (0,)
    return [input.shape, stats, stats]


@register_named("aten::_native_batch_norm_legit_no_training.out")
def batch_norm_no_training(op: str, input, weight, bias, running_mean, running_var, momentum, eps, out0, out1,
                           out2) -> list[tuple]:
    return _batch_norm(op, input, False)


@register_named("aten::_native_batch_norm_legit.out")
def batch_norm(op: str, input, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean,
               save_invstd) -> list[tuple]:
    return _batch_norm(op, input, training)


@register_named("aten::_native_batch_norm_legit.no_stats_out")
def batch_norm_no_stats(op: str, input, weight, bias, training, momentum, eps, out, save_mean,
                        save_invstd) -> list[tuple]:
    return _batch_norm(op, input, True)  # without running stats only training is defined


def _check_normalized_shape(op: str, input, normalized_shape) -> int:
    k = len(normalized_shape)
    check(0 < k <= input.ndim and input.shape[input.ndim - k:] == tuple(normalized_shape), op,
          f"normalized_shape {list(normalized_shape)} does not match the input's trailing dims {list(input.shape)}")
    return k


@register_named("aten::native_layer_norm.out")
def layer_norm(op: str, input, normalized_shape, weight, bias, eps, out0, out1, out2) -> list[tuple]:
    """The output, and mean and rstd shaped like the input with the normalized dims set to 1."""
    k = _check_normalized_shape(op, input, normalized_shape)
    stats = input.shape[:input.ndim - k] + (1,) * k
    return [input.shape, stats, stats]


@register_named("aten::native_group_norm.out")
def group_norm(op: str, input, weight, bias, N, C, HxW, group, eps, out0, out1, out2) -> list[tuple]:
    """The output, and (N, group) mean and rstd."""
    check(input.shape[:2] == (N, C) and input.size == N * C * HxW, op,
          f"input shape {list(input.shape)} does not match N={N}, C={C}, HxW={HxW}")
    return [input.shape, (N, group), (N, group)]


@register_named("aten::native_layer_norm_backward.out")
def layer_norm_backward(op: str, grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask, out0,
                        out1, out2) -> list[tuple]:
    """Gradients shaped like the input, the weight and the bias (both normalized_shape)."""
    _check_normalized_shape(op, input, normalized_shape)
    return masked(output_mask, [input.shape, tuple(normalized_shape), tuple(normalized_shape)])


@register_named("aten::native_group_norm_backward.out")
def group_norm_backward(op: str, grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask, out0, out1,
                        out2) -> list[tuple]:
    """Gradients shaped like the input, the weight and the bias (both (C,))."""
    check(input.shape[:2] == (N, C), op, f"input shape {list(input.shape)} does not match N={N}, C={C}")
    return masked(output_mask, [input.shape, (C,), (C,)])
