"""torchedge's fused operators (``torchedge_fused::``): attention, conv_bn_act, linear_act."""

from __future__ import annotations

from torchedge.kernels.shapes.common import check
from torchedge.kernels.shapes.linear_algebra import product
from torchedge.kernels.shapes.registry import register_named

__all__ = ["attention", "conv_bn_act", "linear_act"]


@register_named("torchedge_fused::attention.out")
def attention(op: str, query, key, value, mask, scale, out) -> list[tuple]:
    """(..., Sq, D) queries against (..., Sk, D) keys weigh (..., Sk, Dv) values: (..., Sq, Dv)."""
    q, k, v = query.shape, key.shape, value.shape
    check(len(q) >= 2 and len(k) == len(q) and len(v) == len(q) and k[:-2] == q[:-2] and v[:-2] == q[:-2]
          and k[-1] == q[-1] and v[-2] == k[-2], op,
          f"shapes do not match: query {list(q)}, key {list(k)}, value {list(v)}")
    return [q[:-1] + v[-1:]]


@register_named("torchedge_fused::conv_bn_act.out")
def conv_bn_act(op: str, input, weight, bias, stride, padding, padding_after, dilation, groups, bn_weight, bn_bias,
                bn_mean, bn_var, eps, activation, low, high, out) -> list[tuple]:
    """(N, C, *S) by (O, C/G, *k), zeros ``padding`` before and ``padding_after`` after each spatial dim."""
    spatial = weight.ndim - 2
    check(input.ndim == spatial + 2 and input.shape[1] == weight.shape[1] * groups, op,
          f"input shape {list(input.shape)} does not match weight shape {list(weight.shape)} and groups={groups}")
    size = tuple((i + p + q - d * (k - 1) - 1) // s + 1 for i, k, s, p, q, d in
                 zip(input.shape[2:], weight.shape[2:], stride, padding, padding_after, dilation))
    check(min(size, default=1) > 0, op, f"the kernel {list(weight.shape[2:])} is larger than the padded input")
    return [(input.shape[0], weight.shape[0]) + size]


@register_named("torchedge_fused::linear_act.out")
def linear_act(op: str, input, weight, bias, activation, out) -> list[tuple]:
    """(M, K) @ (K, N): (M, N)."""
    return [product(op, input.shape, weight.shape, 2)]
