"""``torchedge_fused::attention_exact``: the math decomposition of ``scaled_dot_product_attention``
with the bits of its steps, for load-time fusion at level ``exact``.

The decomposition (as ``torch.export`` writes it and the portable kernels run it) scales q and
kᵀ apart (``mul``), multiplies them (``bmm``), adds the mask, takes the max-shifted softmax that
multiplies by the reciprocal of each row's sum (``_softmax``), zeros the rows whose scores are
all -inf (``where``) and multiplies by the values (``bmm``). This kernel runs the same NumPy
operations on the same operands, a few heads at a time so that their scores stay in the cache
from one product to the other: each matrix product is the same BLAS call on the same matrix,
each row reduction the same reduction of the same row, so the result is bit-identical.
`torchedge.kernels.optimized.fused.attention` is the faster shortcut (one scale, no max pass).
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.optimized.fused import attention_dims, attention_operands
from torchedge.kernels.optimized.scratch import per_call, scratch
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable.common import quiet
from torchedge.kernels.registry import register_kernel

__all__ = ["attention_exact"]

_OP = "torchedge_fused::attention_exact.out"


def _shape(op: str, query, key, value, mask, q_scale, k_scale, out) -> list[tuple]:
    attention_dims(op, query, key, value, False)
    return [query.shape[:-1] + value.shape[-1:]]


@register_kernel(_OP, shape=_shape)
def attention_exact(query, key, value, mask, q_scale, k_scale, out):
    """``where(all(s == -inf), 0, softmax(s)) @ value`` with ``s = (query * q_scale) @ (keyᵀ *
    k_scale) + mask`` over (..., S, D) tensors, computed as the decomposition's steps compute it."""
    dtype, batch, sq, sk = attention_operands(_OP, query, key, value, out, False)
    if out.size == 0:
        return
    heads = (-1,)
    queries, keys, values = (np.ascontiguousarray(x.reshape(heads + x.shape[-2:])) for x in (query, key, value))
    masks = None if mask is None else np.broadcast_to(mask, (*batch, sq, sk)).reshape(heads + (sq, sk))
    target = (
        out.reshape(heads + out.shape[-2:])
        if out.flags.c_contiguous
        else np.empty(values.shape[:1] + (sq, value.shape[-1]), dtype)
    )
    scales = dtype.type(q_scale), dtype.type(k_scale)
    step = max(1, int(tuned("attention_scores_per_chunk")) // max(1, sq * sk))
    with quiet():
        for first in range(0, queries.shape[0], step):
            h = slice(first, first + step)
            _attend(queries[h], keys[h], values[h], None if masks is None else masks[h], scales, target[h])
    if not out.flags.c_contiguous:
        out[...] = target.reshape(out.shape)


@per_call
def _attend(queries, keys, values, mask, scales, out) -> None:
    """One chunk of heads: (h, sq, d) queries, (h, sk, d) keys, (h, sk, dv) values into (h, sq, dv)."""
    dtype = queries.dtype
    h, sq, d = queries.shape
    sk = keys.shape[1]
    scaled_q = np.multiply(queries, scales[0], out=scratch(queries.shape, dtype))
    scaled_k = scratch((h, d, sk), dtype)
    np.multiply(keys.transpose(0, 2, 1), scales[1], out=scaled_k)
    scores = scratch((h, sq, sk), dtype)
    np.matmul(scaled_q, scaled_k, out=scores)
    if mask is not None:
        np.add(scores, mask, out=scores)
    peak = np.max(scores, axis=2, keepdims=True)
    empty = np.isneginf(peak[..., 0])  # the safe softmax's fully masked rows (a nan makes the max nan)
    np.subtract(scores, peak, out=scores, dtype=dtype, casting="unsafe")
    weights = np.exp(scores, out=scores)
    total = np.add.reduce(weights, axis=2, keepdims=True)
    np.divide(1, total, out=total)
    weights *= total
    if empty.any():
        weights[empty] = 0
    np.matmul(weights, values, out=out)
