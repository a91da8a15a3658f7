"""Inference batch norm and layer norm."""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, result_type
from torchedge.kernels.portable.common import check, finish, quiet, scratch, write
from torchedge.kernels.registry import register_kernel

__all__ = ["batch_norm_no_training", "layer_norm"]


@register_kernel("aten::_native_batch_norm_legit_no_training.out")
def batch_norm_no_training(input, weight, bias, running_mean, running_var, momentum, eps, out0, out1, out2):
    """``input * scale + shift`` per channel (dim 1), with ``scale = weight / sqrt(var + eps)``
    and ``shift = bias - mean * scale``, as ATen's CPU kernel folds it. The saved mean and
    invstd outputs are empty in inference, as in ATen."""
    op = "aten::_native_batch_norm_legit_no_training.out"
    check(input.ndim >= 2, op, f"expected an input with a channel dim, got shape {list(input.shape)}")
    channels = input.shape[1]
    check(running_mean.shape == (channels,) and running_var.shape == (channels,), op,
          f"running stats must have shape [{channels}], got {list(running_mean.shape)} and {list(running_var.shape)}")
    acc = accumulate_dtype(result_type(input, running_mean))
    with quiet():
        scale = 1 / np.sqrt(running_var.astype(acc) + eps)
        if weight is not None:
            scale *= weight
        shift = -running_mean.astype(acc) * scale
        if bias is not None:
            shift += bias
        per_channel = (channels,) + (1,) * (input.ndim - 2)
        buf = scratch(out0, acc)
        np.multiply(input, scale.reshape(per_channel), out=buf, dtype=acc, casting="unsafe")
        buf += shift.reshape(per_channel)
    finish(out0, buf)


@register_kernel("aten::native_layer_norm.out")
def layer_norm(input, normalized_shape, weight, bias, eps, out0, out1, out2):
    """Normalise over the trailing ``normalized_shape`` dims; out1/out2 get mean and rstd
    (biased variance), shaped like the input with those dims set to 1."""
    op = "aten::native_layer_norm.out"
    k = len(normalized_shape)
    check(0 < k <= input.ndim and tuple(input.shape[input.ndim - k:]) == tuple(normalized_shape), op,
          f"normalized_shape {list(normalized_shape)} does not match the input's trailing dims {list(input.shape)}")
    if input.size == 0:
        return
    rows = input.shape[: input.ndim - k]
    width = math.prod(normalized_shape)
    acc = accumulate_dtype(input.dtype)
    x = input.reshape(-1, width).astype(acc, copy=False)
    with quiet():
        mean = x.mean(axis=1, keepdims=True, dtype=acc)
        centred = x - mean
        variance = np.einsum("ij,ij->i", centred, centred)[:, None] / width
        rstd = 1 / np.sqrt(variance + eps)
        centred *= rstd
        if weight is not None:
            centred *= weight.reshape(1, width)
        if bias is not None:
            centred += bias.reshape(1, width)
    write(out0, centred.reshape(input.shape))
    stats_shape = rows + (1,) * k
    write(out1, mean.reshape(stats_shape))
    write(out2, rstd.reshape(stats_shape))
