"""aten::convolution.out for 1-d and 2-d inputs: im2col and one batched GEMM.

The kernel taps of the padded input are gathered once into a (N, G, C/G*KH*KW, OH*OW)
column matrix (im2col) and multiplied by the (G, O/G, C/G*KH*KW) weights in a single
``np.matmul`` (BLAS per batch element and group). Depthwise convolutions (one input
channel per group) instead accumulate ``weight[:, i, j] * tap[i][j]`` over the KH*KW
kernel taps, vectorised over batch, channels and pixels.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, result_type
from torchedge.kernels.portable.common import check, finish, pair, quiet
from torchedge.kernels.portable.linear_algebra import matmul_into
from torchedge.kernels.portable.windows import output_size, taps2d
from torchedge.kernels.registry import register_kernel

__all__ = ["convolution"]

_OP = "aten::convolution.out"


@register_kernel(_OP)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out):
    check(not transposed, _OP, "transposed convolution is not supported yet by the portable kernels")
    spatial = weight.ndim - 2
    check(spatial in (1, 2), _OP, f"only 1-d and 2-d convolutions are supported, got a {weight.ndim}-D weight")
    check(input.ndim in (spatial + 1, spatial + 2), _OP,
          f"expected a {spatial + 2}-D (batched) or {spatial + 1}-D input, got shape {list(input.shape)}")
    if input.ndim == spatial + 1:  # unbatched
        input, out = input[None], out[None]
    params = [pair(v, spatial, name, _OP) for v, name in
              ((stride, "stride"), (padding, "padding"), (dilation, "dilation"))]
    if spatial == 1:  # a 1-d convolution is a 2-d one with a height-1 kernel
        input, weight, out = input[:, :, None], weight[:, :, None], out[:, :, None]
        params = [(first,) + p for first, p in zip((1, 0, 1), params)]
    _conv2d(input, weight, bias, *params, groups, out)


def _conv2d(x, weight, bias, stride, padding, dilation, groups, out):
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    check(groups >= 1 and c == cg * groups and o % groups == 0, _OP,
          f"input channels ({c}) and weight shape {list(weight.shape)} do not match groups={groups}")
    oh, ow = (output_size(size, k, s, p, d) for size, k, s, p, d in
              zip((h, w), (kh, kw), stride, padding, dilation))
    check(out.shape[-2:] == (oh, ow) and out.shape[:2] == (n, o), _OP,
          f"out has shape {list(out.shape)}, expected {[n, o, oh, ow]}")
    acc = accumulate_dtype(result_type(x, weight))
    with quiet():
        if cg == 1 and groups > 1:
            buf = _depthwise(taps2d(x, (kh, kw), stride, padding, dilation, (oh, ow), 0, acc), weight, acc)
        else:
            buf = _grouped(_im2col(x, (kh, kw), stride, padding, dilation, (oh, ow), acc), weight, groups, out, acc)
        if bias is not None:
            np.add(buf, bias.reshape(1, o, 1, 1), out=buf, casting="unsafe")
    finish(out, buf)


def _im2col(x, kernel, stride, padding, dilation, out_hw, acc):
    """The (N, C, KH, KW, OH*OW) column matrix (no copy for a plain 1x1 convolution)."""
    n, c = x.shape[:2]
    if kernel == (1, 1) and tuple(stride) == (1, 1) and tuple(padding) == (0, 0) and x.dtype == acc:
        return x.reshape(n, c, 1, 1, -1)
    matrix = np.empty((n, c) + tuple(kernel) + tuple(out_hw), acc)
    for i, row in enumerate(taps2d(x, kernel, stride, padding, dilation, out_hw, 0, acc)):
        for j, tap in enumerate(row):
            matrix[:, :, i, j] = tap
    return matrix.reshape(n, c, kernel[0], kernel[1], -1)


def _grouped(matrix, weight, groups, out, acc):
    n, c, kh, kw, pixels = matrix.shape
    o = weight.shape[0]
    k = c // groups * kh * kw
    columns = matrix.reshape(n, groups, k, pixels)
    kernels = weight.reshape(groups, o // groups, k)
    shape = (n, groups, o // groups, pixels)
    if out.dtype == acc and out.flags.c_contiguous:  # multiply straight into out
        matmul_into(kernels, columns, out.reshape(shape), acc)
        return out
    return matmul_into(kernels, columns, np.empty(shape, acc), acc).reshape(out.shape)


def _depthwise(taps, weight, acc):
    n, c, oh, ow = taps[0][0].shape
    kh, kw = len(taps), len(taps[0])
    multiplier = weight.shape[0] // c
    kernels = weight.reshape(c, multiplier, kh, kw).astype(acc, copy=False)
    total = np.zeros((n, c, multiplier, oh, ow), acc)
    term = np.empty_like(total)
    for i in range(kh):
        for j in range(kw):
            np.multiply(taps[i][j][:, :, None], kernels[None, :, :, i, j, None, None], out=term)
            total += term
    return total.reshape(n, c * multiplier, oh, ow)
