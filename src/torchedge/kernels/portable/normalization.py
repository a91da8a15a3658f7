"""Batch norm (inference and training), layer norm, group norm, and the norms' backward."""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, result_type
from torchedge.kernels.portable.common import check, fail, finish, quiet, row_sums, scratch, write
from torchedge.kernels.portable.shape_rules import masked
from torchedge.kernels.registry import register_kernel

__all__ = [
    "batch_norm_no_training",
    "layer_norm",
    "batch_norm",
    "batch_norm_no_stats",
    "group_norm",
    "layer_norm_backward",
    "group_norm_backward",
]


def _check_has_channels(op: str, input) -> None:
    if input.ndim < 2:
        fail(op, f"expected an input with a channel dim, got shape {list(input.shape)}")


def _batch_norm_outputs(op: str, input, training: bool) -> list[tuple]:
    """The output and the saved mean and invstd: one per channel (dim 1) in training,
    empty in inference (as in ATen)."""
    _check_has_channels(op, input)
    stats = (input.shape[1],) if training else (0,)
    return [input.shape, stats, stats]


def _check_channel_parameters(op: str, input, weight, bias, running_mean, running_var) -> None:
    """Inference batch norm's per-channel tensors: one value per channel (dim 1) of ``input``."""
    _check_has_channels(op, input)
    channels = input.shape[1]
    named = {"weight": weight, "bias": bias, "running_mean": running_mean, "running_var": running_var}
    for name, tensor in named.items():
        if tensor is not None or name.startswith("running"):
            shape = None if tensor is None else list(tensor.shape)
            check(shape == [channels], op, f"{name} must have shape [{channels}] (the input's channels), got {shape}")


def _batch_norm_no_training_shape(
    op: str, input, weight, bias, running_mean, running_var, momentum, eps, out0, out1, out2
) -> list[tuple]:
    _check_channel_parameters(op, input, weight, bias, running_mean, running_var)
    return _batch_norm_outputs(op, input, False)


@register_kernel("aten::_native_batch_norm_legit_no_training.out", shape=_batch_norm_no_training_shape)
def batch_norm_no_training(input, weight, bias, running_mean, running_var, momentum, eps, out0, out1, out2):
    """``input * scale + shift`` per channel (dim 1), with ``scale = weight / sqrt(var + eps)``
    and ``shift = bias - mean * scale``, as ATen's CPU kernel folds it. The saved mean and
    invstd outputs are empty in inference, as in ATen."""
    op = "aten::_native_batch_norm_legit_no_training.out"
    _check_channel_parameters(op, input, weight, bias, running_mean, running_var)
    channels = input.shape[1]
    acc = accumulate_dtype(result_type(input, running_mean))
    with quiet():
        scale = 1 / np.sqrt(running_var.astype(acc) + eps)
        if weight is not None:
            scale *= weight
        shift = -running_mean.astype(acc) * scale
        if bias is not None:
            shift += bias
        buf = scratch(out0, acc)
        if input.ndim > 2 and input.flags.c_contiguous and buf.flags.c_contiguous:
            # (N, C, positions): NumPy's inner loops then run over whole planes, not rows
            x, target = input.reshape(input.shape[0], channels, -1), buf.reshape(input.shape[0], channels, -1)
            per_channel = (channels, 1)
        else:
            x, target, per_channel = input, buf, (channels,) + (1,) * (input.ndim - 2)
        np.multiply(x, scale.reshape(per_channel), out=target, dtype=acc, casting="unsafe")
        target += shift.reshape(per_channel)
    finish(out0, buf)


def _check_normalized_shape(op: str, input, normalized_shape) -> int:
    k = len(normalized_shape)
    if not 0 < k <= input.ndim or input.shape[input.ndim - k :] != tuple(normalized_shape):
        fail(
            op,
            f"normalized_shape {list(normalized_shape)} does not match the input's trailing dims {list(input.shape)}",
        )
    return k


def _layer_norm_shape(op: str, input, normalized_shape, weight, bias, eps, out0, out1, out2) -> list[tuple]:
    """The output, and mean and rstd shaped like the input with the normalized dims set to 1."""
    k = _check_normalized_shape(op, input, normalized_shape)
    stats = input.shape[: input.ndim - k] + (1,) * k
    return [input.shape, stats, stats]


@register_kernel("aten::native_layer_norm.out", shape=_layer_norm_shape)
def layer_norm(input, normalized_shape, weight, bias, eps, out0, out1, out2):
    """Normalise over the trailing ``normalized_shape`` dims; out1/out2 get mean and rstd
    (biased variance), shaped like the input with those dims set to 1."""
    op = "aten::native_layer_norm.out"
    k = _check_normalized_shape(op, input, normalized_shape)
    if input.size == 0:
        return
    rows = input.shape[: input.ndim - k]
    width = math.prod(normalized_shape)
    acc = accumulate_dtype(input.dtype)
    x = input.reshape(-1, width).astype(acc, copy=False)
    # Normalise straight into out when it can hold the result (its dtype, C-contiguous, and not
    # overlapping the input that the centring pass still reads).
    direct = out0.dtype == acc and out0.flags.c_contiguous and not np.may_share_memory(out0, input)
    with quiet():
        # The mean by `row_sums`, the variance by each centred row's dot product with itself.
        mean = row_sums(x)
        mean /= width
        centred = np.subtract(x, mean, out=out0.reshape(x.shape) if direct else None)
        variance = _row_dots(centred)[:, None]
        variance /= width
        variance += eps
        rstd = np.sqrt(variance, out=variance)
        np.divide(1, rstd, out=rstd)
        centred *= rstd
        if weight is not None:
            np.multiply(centred, weight.reshape(1, width), out=centred, casting="unsafe")
        if bias is not None:
            centred += bias.reshape(1, width)
    if not direct:
        write(out0, centred.reshape(input.shape))
    stats_shape = rows + (1,) * k
    write(out1, mean.reshape(stats_shape))
    write(out2, rstd.reshape(stats_shape))


def _row_dots(rows: np.ndarray) -> np.ndarray:
    """Each row's dot product with itself."""
    if hasattr(np, "vecdot"):  # NumPy 2
        return np.vecdot(rows, rows)
    return np.einsum("ij,ij->i", rows, rows)


def _per_channel(values, ndim):
    """A (C,) array shaped to broadcast over dim 1 of an ``ndim``-D tensor."""
    return values.reshape((1, -1) + (1,) * (ndim - 2))


def _batch_norm_shape(
    op: str, input, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean, save_invstd
) -> list[tuple]:
    return _batch_norm_outputs(op, input, training)


@register_kernel("aten::_native_batch_norm_legit.out", shape=_batch_norm_shape)
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean, save_invstd):
    """Training: normalise with the batch statistics of every channel (dim 1), save them
    (mean and 1 / sqrt(biased var + eps)) and move the running stats in place toward them
    (``running = (1 - momentum) * running + momentum * batch``, with the unbiased variance).
    Inference: `batch_norm_no_training` with the running stats, saved stats left empty."""
    if not training:
        batch_norm_no_training(
            input, weight, bias, running_mean, running_var, momentum, eps, out, save_mean, save_invstd
        )
        return
    _batch_norm_training(
        "aten::_native_batch_norm_legit.out",
        input,
        weight,
        bias,
        running_mean,
        running_var,
        momentum,
        eps,
        out,
        save_mean,
        save_invstd,
    )


def _batch_norm_no_stats_shape(
    op: str, input, weight, bias, training, momentum, eps, out, save_mean, save_invstd
) -> list[tuple]:
    return _batch_norm_outputs(op, input, True)  # without running stats only training is defined


@register_kernel("aten::_native_batch_norm_legit.no_stats_out", shape=_batch_norm_no_stats_shape)
def batch_norm_no_stats(input, weight, bias, training, momentum, eps, out, save_mean, save_invstd):
    """Batch norm without running stats: only training mode (batch statistics) is defined."""
    op = "aten::_native_batch_norm_legit.no_stats_out"
    check(training, op, "without running stats, batch norm needs training=True (the batch statistics)")
    _batch_norm_training(op, input, weight, bias, None, None, momentum, eps, out, save_mean, save_invstd)


def _batch_norm_training(
    op, input, weight, bias, running_mean, running_var, momentum, eps, out, save_mean, save_invstd
):
    _check_has_channels(op, input)
    channels = input.shape[1]
    count = input.size // max(channels, 1)
    check(count > 1, op, f"expected more than 1 value per channel when training, got input size {list(input.shape)}")
    acc = accumulate_dtype(input.dtype)
    axes = (0,) + tuple(range(2, input.ndim))
    with quiet():
        x = input.astype(acc, copy=False)
        mean = x.mean(axis=axes, dtype=acc)
        centred = x - _per_channel(mean, input.ndim)
        flat = centred.reshape(centred.shape[0], channels, -1)
        var = np.einsum("ncs,ncs->c", flat, flat) / count
        invstd = 1 / np.sqrt(var + eps)
        scale = invstd if weight is None else invstd * weight
        centred *= _per_channel(scale.astype(acc, copy=False), input.ndim)
        if bias is not None:
            centred += _per_channel(bias.astype(acc, copy=False), input.ndim)
        write(out, centred)
        write(save_mean, mean)
        write(save_invstd, invstd)
        if running_mean is not None:
            write(running_mean, (1 - momentum) * running_mean.astype(acc) + momentum * mean)
        if running_var is not None:
            write(running_var, (1 - momentum) * running_var.astype(acc) + momentum * var * (count / (count - 1)))


def _group_norm_shape(op: str, input, weight, bias, N, C, HxW, group, eps, out0, out1, out2) -> list[tuple]:
    """The output, and (N, group) mean and rstd."""
    check(
        input.shape[:2] == (N, C) and input.size == N * C * HxW,
        op,
        f"input shape {list(input.shape)} does not match N={N}, C={C}, HxW={HxW}",
    )
    return [input.shape, (N, group), (N, group)]


@register_kernel("aten::native_group_norm.out", shape=_group_norm_shape)
def group_norm(input, weight, bias, N, C, HxW, group, eps, out0, out1, out2):
    """Normalise each of ``group`` channel groups of every sample over its channels and
    positions; out1/out2 get the (N, group) mean and 1 / sqrt(biased var + eps)."""
    op = "aten::native_group_norm.out"
    check(
        input.shape[:2] == (N, C) and input.size == N * C * HxW,
        op,
        f"input shape {list(input.shape)} does not match N={N}, C={C}, HxW={HxW}",
    )
    check(group > 0 and C % group == 0, op, f"the channels ({C}) must divide into {group} groups")
    if input.size == 0:
        return
    acc = accumulate_dtype(input.dtype)
    with quiet():
        x = input.reshape(N, group, -1).astype(acc, copy=False)
        mean = x.mean(axis=2, dtype=acc, keepdims=True)
        centred = x - mean
        rstd = 1 / np.sqrt(np.einsum("ngk,ngk->ng", centred, centred)[..., None] / max(x.shape[2], 1) + eps)
        # y = x * scale + shift per (sample, channel), as ATen folds it
        scale = np.repeat(rstd.reshape(N, group), C // group, axis=1)
        if weight is not None:
            scale *= weight.astype(acc)
        shift = -np.repeat(mean.reshape(N, group), C // group, axis=1) * scale
        if bias is not None:
            shift += bias.astype(acc)
        y = centred.reshape(N, C, HxW)  # reused as the output buffer
        np.multiply(x.reshape(N, C, HxW), scale[..., None], out=y)
        y += shift[..., None]
    write(out0, y.reshape(input.shape))
    write(out1, mean.reshape(N, group))
    write(out2, rstd.reshape(N, group))


def _layer_norm_backward_shape(
    op: str, grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask, out0, out1, out2
) -> list[tuple]:
    """Gradients shaped like the input, the weight and the bias (both normalized_shape)."""
    _check_normalized_shape(op, input, normalized_shape)
    return masked(output_mask, [input.shape, tuple(normalized_shape), tuple(normalized_shape)])


@register_kernel("aten::native_layer_norm_backward.out", shape=_layer_norm_backward_shape)
def layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask, out0, out1, out2):
    """Gradients of `layer_norm` for the outs that ``output_mask`` asks for (the others
    are left untouched): ``dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`` with
    ``g = grad_out * weight``, ``dweight = sum(grad_out * xhat)``, ``dbias = sum(grad_out)``."""
    op = "aten::native_layer_norm_backward.out"
    k = len(normalized_shape)
    check(
        0 < k <= input.ndim and tuple(input.shape[input.ndim - k :]) == tuple(normalized_shape),
        op,
        f"normalized_shape {list(normalized_shape)} does not match the input's trailing dims {list(input.shape)}",
    )
    width = math.prod(normalized_shape)
    acc = accumulate_dtype(input.dtype)
    dy = grad_out.reshape(-1, width).astype(acc, copy=False)
    with quiet():
        xhat = (input.reshape(-1, width).astype(acc, copy=False) - mean.reshape(-1, 1)) * rstd.reshape(-1, 1)
        if output_mask[0]:
            g = dy if weight is None else dy * weight.reshape(1, width).astype(acc)
            write(out0, _normalized_grad(g, xhat, rstd.reshape(-1, 1), axis=1).reshape(input.shape))
        if output_mask[1] and weight is not None:
            write(out1, np.einsum("ij,ij->j", dy, xhat).reshape(weight.shape))
        if output_mask[2] and bias is not None:
            write(out2, dy.sum(axis=0, dtype=acc).reshape(bias.shape))


def _normalized_grad(g, xhat, rstd, axis):
    """``rstd * (g - mean(g) - xhat * mean(g * xhat))`` over ``axis``."""
    mean_g = g.mean(axis=axis, keepdims=True)
    mean_gx = (g * xhat).mean(axis=axis, keepdims=True)
    return rstd * (g - mean_g - xhat * mean_gx)


def _group_norm_backward_shape(
    op: str, grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask, out0, out1, out2
) -> list[tuple]:
    """Gradients shaped like the input, the weight and the bias (both (C,))."""
    check(input.shape[:2] == (N, C), op, f"input shape {list(input.shape)} does not match N={N}, C={C}")
    return masked(output_mask, [input.shape, (C,), (C,)])


@register_kernel("aten::native_group_norm_backward.out", shape=_group_norm_backward_shape)
def group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask, out0, out1, out2):
    """Gradients of `group_norm` for the outs that ``output_mask`` asks for."""
    op = "aten::native_group_norm_backward.out"
    check(
        input.shape[:2] == (N, C) and input.size == N * C * HxW and C % group == 0,
        op,
        f"input shape {list(input.shape)} does not match N={N}, C={C}, HxW={HxW}, group={group}",
    )
    acc = accumulate_dtype(input.dtype)
    dy = grad_out.reshape(N, C, HxW).astype(acc, copy=False)
    with quiet():
        stats = (mean.reshape(N, group, 1, 1).astype(acc), rstd.reshape(N, group, 1, 1).astype(acc))
        xhat = (input.reshape(N, group, C // group, HxW).astype(acc, copy=False) - stats[0]) * stats[1]
        xhat = xhat.reshape(N, C, HxW)
        if output_mask[0]:
            g = dy if weight is None else dy * weight.reshape(1, C, 1).astype(acc)
            grad = _normalized_grad(g.reshape(N, group, -1), xhat.reshape(N, group, -1), stats[1][..., 0], axis=2)
            write(out0, grad.reshape(input.shape))
        if output_mask[1] and weight is not None:
            write(out1, np.einsum("nck,nck->c", dy, xhat))
        if output_mask[2]:
            write(out2, dy.sum(axis=(0, 2), dtype=acc))
