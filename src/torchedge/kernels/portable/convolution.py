"""aten::convolution.out for 1-d and 2-d inputs: im2col and one batched GEMM.

The windows of the padded input are gathered once into a (N, G, C/G*KH*KW, OH*OW)
column matrix and multiplied by the (G, O/G, C/G*KH*KW) weights in a single
``np.matmul`` (BLAS per batch element and group). Depthwise convolutions (one input
channel per group) instead accumulate ``weight[:, i, j] * window[i, j]`` over the
KH*KW kernel positions, vectorised over batch, channels and pixels.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, result_type
from torchedge.kernels.portable.common import check, finish, pair, quiet
from torchedge.kernels.portable.linear_algebra import matmul_into
from torchedge.kernels.portable.windows import output_size, pad2d, windows2d
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
    extent = ((oh - 1) * stride[0] + dilation[0] * (kh - 1) + 1, (ow - 1) * stride[1] + dilation[1] * (kw - 1) + 1)
    padded = pad2d(x, tuple(padding), extent, 0, acc)
    cols = windows2d(padded, (kh, kw), stride, dilation, (oh, ow))  # (N, C, KH, KW, OH, OW)
    with quiet():
        buf = _depthwise(cols, weight, acc) if cg == 1 and groups > 1 else _grouped(cols, weight, groups, out, acc)
        if bias is not None:
            np.add(buf, bias.reshape(1, o, 1, 1), out=buf, casting="unsafe")
    finish(out, buf)


def _grouped(cols, weight, groups, out, acc):
    n, c, kh, kw, oh, ow = cols.shape
    o = weight.shape[0]
    k = c // groups * kh * kw
    if cols.flags.c_contiguous:  # e.g. a 1x1 kernel with stride 1: the input is already im2col
        matrix = cols.reshape(n, groups, k, oh * ow)
    else:
        matrix = np.empty((n, c, kh, kw, oh, ow), acc)
        np.copyto(matrix, cols)  # the im2col copy
        matrix = matrix.reshape(n, groups, k, oh * ow)
    kernels = weight.reshape(groups, o // groups, k)
    if out.dtype == acc and out.flags.c_contiguous:  # multiply straight into out
        target = out.reshape(n, groups, o // groups, oh * ow)
        matmul_into(kernels, matrix, target, acc)
        return out
    return matmul_into(kernels, matrix, np.empty((n, groups, o // groups, oh * ow), acc), acc).reshape(n, o, oh, ow)


def _depthwise(cols, weight, acc):
    n, c, kh, kw, oh, ow = cols.shape
    multiplier = weight.shape[0] // c
    kernels = weight.reshape(c, multiplier, kh, kw).astype(acc, copy=False)
    total = np.zeros((n, c, multiplier, oh, ow), acc)
    term = np.empty_like(total)
    for i in range(kh):
        for j in range(kw):
            np.multiply(cols[:, :, None, i, j], kernels[None, :, :, i, j, None, None], out=term)
            total += term
    return total.reshape(n, c * multiplier, oh, ow)
