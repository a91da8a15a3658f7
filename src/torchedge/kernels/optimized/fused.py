"""Kernels of torchedge's fused operators (``torchedge_fused::``), one call doing the work of several.

The compiler chooses them ahead of time (`torchedge.exir.passes.kernel_fusion`, opt-in) where
a chain of core ATen operators has a cheaper single kernel; the real ExecuTorch has none of
them, so a program using them fails to load there naming the operator. Each computes what
the chain it replaces computes, within the kernel tests' tolerances:

* ``attention.out``: ``softmax(query @ key^T * scale + mask) @ value`` over the trailing two
  dims, rows whose scores are all -inf giving zeros (ATen's ``_safe_softmax``): the math
  decomposition of ``scaled_dot_product_attention`` without its dozen intermediate tensors.
* ``conv_bn_act.out``: a convolution with an optional constant zero padding before it (any
  amount per side), an optional inference batch norm folded into its weights and bias, and
  an optional ``relu`` / ``hardtanh`` applied to the output in place.
* ``linear_act.out``: ``input @ weight (+ bias)`` (``mm`` / ``addmm``) with ``relu``, ``gelu``
  or ``silu`` applied to the product in place.

Folded convolution weights are computed once per read-only (constant) weight array and kept
while that array lives, as ExecuTorch's delegates prepack their weights at load time.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.optimized.clamp_rows import clamp_by_numbers
from torchedge.kernels.optimized.convolution import conv_forward
from torchedge.kernels.optimized.derived_arrays import derived
from torchedge.kernels.optimized.prepared import prepared
from torchedge.kernels.optimized.scratch import per_call, scratch
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable.activation import _gelu_erf_float32
from torchedge.kernels.portable.common import check, fail, quiet, row_sums, write
from torchedge.kernels.portable.linear_algebra import product_shape
from torchedge.kernels.registry import register_kernel

__all__ = [
    "NAMESPACE",
    "attention",
    "attention_interleaved",
    "conv_bn_act",
    "linear_act",
    "ACTIVATIONS",
    "FLOATS",
    "check_float",
    "attention_dims",
]

NAMESPACE = "torchedge_fused"
ACTIVATIONS = ("none", "relu", "hardtanh", "gelu", "silu")
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # the dtypes the fused kernels take


def check_float(op: str, *arrays) -> np.dtype:
    dtype = arrays[0].dtype
    for a in arrays:
        if a is not None and a.dtype != dtype:
            fail(op, f"expects tensors of one dtype, got {a.dtype} and {dtype}")
    if dtype not in FLOATS:
        fail(op, f"is implemented for float32 and float64, got {dtype}")
    return dtype


# -- attention ---------------------------------------------------------------------------


def attention_dims(op: str, query, key, value, interleaved: bool) -> tuple:
    """Check the shapes of (..., S, D) queries, keys and values, or interleaved (..., S, H, D)
    ones; return (batch, sq, sk) with the heads in the batch dims."""
    q, k, v = query.shape, key.shape, value.shape
    lead = 3 if interleaved else 2  # dims after the batch: (S, H, D) or (S, D)
    check(
        len(q) >= lead
        and len(k) == len(q)
        and len(v) == len(q)
        and k[:-lead] == q[:-lead]
        and v[:-lead] == q[:-lead]
        and k[-1] == q[-1]
        and v[-lead] == k[-lead]
        and (not interleaved or k[-2] == q[-2] == v[-2]),
        op,
        f"shapes do not match: query {list(q)}, key {list(k)}, value {list(v)}",
    )
    batch = q[:-3] + q[-2:-1] if interleaved else q[:-2]
    return batch, q[-lead], k[-lead]


def attention_operands(op: str, query, key, value, out, interleaved: bool) -> tuple:
    """Check the dtypes and shapes of an attention's operands and ``out``; return (dtype, batch,
    sq, sk) (`check_float`, `attention_dims`)."""
    dtype = check_float(op, query, key, value, out)
    batch, sq, sk = attention_dims(op, query, key, value, interleaved)
    expected = query.shape[:-1] + value.shape[-1:]
    check(tuple(out.shape) == expected, op, f"out has shape {list(out.shape)}, expected {list(expected)}")
    return dtype, batch, sq, sk


def _attention_shape(op: str, query, key, value, mask, scale, out) -> list[tuple]:
    """(..., Sq, D) queries against (..., Sk, D) keys weigh (..., Sk, Dv) values: (..., Sq, Dv)."""
    attention_dims(op, query, key, value, False)
    return [query.shape[:-1] + value.shape[-1:]]


def _interleaved_attention_shape(op: str, query, key, value, mask, scale, out) -> list[tuple]:
    """(..., Sq, H, D) queries, (..., Sk, H, D) keys and (..., Sk, H, Dv) values: (..., Sq, H, Dv)."""
    attention_dims(op, query, key, value, True)
    return [query.shape[:-1] + value.shape[-1:]]


@register_kernel("torchedge_fused::attention.out", shape=_attention_shape)
def attention(query, key, value, mask, scale, out):
    _attention(f"{NAMESPACE}::attention.out", query, key, value, mask, scale, out, interleaved=False)


@register_kernel("torchedge_fused::attention_interleaved.out", shape=_interleaved_attention_shape)
def attention_interleaved(query, key, value, mask, scale, out):
    """`attention` on (..., S, H, D) tensors (each token's heads side by side, as the projections
    lay them out) into a (..., Sq, H, Dv) ``out``; the mask broadcasts to (..., H, Sq, Sk)."""
    _attention(f"{NAMESPACE}::attention_interleaved.out", query, key, value, mask, scale, out, interleaved=True)


def _heads_first(x: np.ndarray, heads: int, interleaved: bool) -> np.ndarray:
    """A (B, H, S, D) view (or copy, for a tensor that does not reshape in place) of ``x``."""
    if interleaved:
        return x.reshape(-1, x.shape[-3], heads, x.shape[-1]).transpose(0, 2, 1, 3)
    return x.reshape(1, -1, x.shape[-2], x.shape[-1])


def _attention(op: str, query, key, value, mask, scale, out, interleaved: bool) -> None:
    dtype, batch, sq, sk = attention_operands(op, query, key, value, out, interleaved)
    if out.size == 0:
        return
    if sk == 0:  # no keys: every query's scores are empty, all masked out (safe softmax: zeros)
        out[...] = 0
        return
    heads = query.shape[-2] if interleaved else math.prod(batch)
    queries, keys, values = (_heads_first(x, heads, interleaved) for x in (query, key, value))
    masks = None
    if mask is not None:
        shape = (*batch, sq, sk)
        try:
            masks = np.broadcast_to(mask, shape).reshape(queries.shape[:2] + (sq, sk))
        except ValueError:
            fail(op, f"mask of shape {list(mask.shape)} does not broadcast to the scores' shape {list(shape)}")
    direct = out.flags.c_contiguous
    target = out if direct else np.empty(out.shape, dtype)
    results = _heads_first(target, heads, interleaved)
    # A few heads at a time, so that their scores stay in the L2 cache from the product with the
    # keys to the product with the values (and long sequences never hold every head's scores).
    step = max(1, int(tuned("attention_scores_per_chunk")) // (sq * sk))
    with quiet():
        for b in range(queries.shape[0]):
            for first in range(0, heads, step):
                h = slice(first, min(first + step, heads))
                chunk_mask = None if masks is None else masks[b, h]
                _attend(queries[b, h], keys[b, h], values[b, h], chunk_mask, scale, results[b, h])
    if not direct:
        write(out, target)


# With every row's sum of unshifted weights at least this (and finite), the largest weight of
# each row is at least this / sk: far above the subnormals, so the weights lose nothing.
_ROW_SUM_FLOOR = 2.0**-24


@per_call
def _attend(queries, keys, values, mask, scale: float, out) -> None:
    """One chunk of heads: (h, sq, d) queries, (h, sk, d) keys, (h, sk, dv) values into
    (h, sq, dv) ``out``. The queries are scaled chunk by chunk (d values per query instead of
    sk scores, and the scaled chunk is still in the cache for its product). The softmax's sum
    divides the (sq, dv) result instead of the (sq, sk) weights. Softmax is shift-invariant, so
    exp first runs on the scores as they are, with no pass for each row's maximum: only where a
    row's sum of weights then lies below `_ROW_SUM_FLOOR` or is not finite (a score past exp's
    overflow, a row far below 0 or fully masked, nan), or the result is not finite (values whose
    products with the weights overflow), is the chunk redone with each row shifted by its
    maximum."""
    if scale != 1:
        dtype = queries.dtype
        queries = np.multiply(queries, dtype.type(scale), out=scratch(queries.shape, dtype))
    scores = _scores(queries, keys, mask, scratch((queries.shape[0], queries.shape[1], keys.shape[1]), queries.dtype))
    np.exp(scores, out=scores)
    total = row_sums(scores)
    if _ROW_SUM_FLOOR <= np.min(total) and np.isfinite(np.max(total)):  # nan: shift
        _weigh_values(scores, total, values, out)
        if np.isfinite(np.min(out)) and np.isfinite(np.max(out)):
            return
    scores = _scores(queries, keys, mask, scores)
    peak = np.maximum.reduce(scores, axis=2, keepdims=True)
    empty = np.isneginf(peak)  # queries whose scores are all masked out: zeros (safe softmax)
    masked_rows = bool(empty.any())
    if masked_rows:
        peak[empty] = 0
    scores -= peak
    np.exp(scores, out=scores)
    _weigh_values(scores, row_sums(scores), values, out)
    if masked_rows:
        out[empty[..., 0]] = 0


def _scores(queries, keys, mask, scores) -> np.ndarray:
    """The (h, sq, sk) scores of a chunk (plus the mask) into ``scores``."""
    dtype = queries.dtype
    np.matmul(queries, keys.transpose(0, 2, 1), out=scores)
    if mask is not None:
        np.add(scores, mask, out=scores, dtype=dtype, casting="unsafe")
    return scores


def _weigh_values(weights, total, values, out) -> None:
    """``(weights @ values) / total`` into ``out``."""
    np.matmul(weights, values, out=out)
    out /= total


# -- convolution + batch norm + activation -------------------------------------------------


def _fold_batch_norm(weight, bias, bn_weight, bn_bias, mean, var, eps, dtype):
    """Weights and bias of the convolution followed by the batch norm: per output channel o,
    ``w'[o] = w[o] * scale[o]`` and ``b'[o] = (b[o] - mean[o]) * scale[o] + beta[o]`` with
    ``scale = gamma / sqrt(var + eps)``, as ATen folds an inference batch norm."""
    scale = np.sqrt(var.astype(dtype) + dtype.type(eps))
    np.divide(1, scale, out=scale)
    if bn_weight is not None:
        scale *= bn_weight
    shift = -mean.astype(dtype) if bias is None else bias.astype(dtype) - mean
    shift *= scale
    if bn_bias is not None:
        shift += bn_bias
    folded = weight.astype(dtype) * scale.reshape((-1,) + (1,) * (weight.ndim - 1))
    return folded, shift


def _activate(out, activation: str, low: float, high: float) -> None:
    """Apply ``activation`` to ``out`` in place."""
    if activation == "none":
        return
    with quiet():
        if activation == "relu":
            clamp_by_numbers(out, 0, None, out)
        elif activation == "hardtanh":
            clamp_by_numbers(out, low, high, out)
        elif activation == "gelu":
            if out.dtype == np.float32 and out.flags.c_contiguous:
                _gelu_erf_float32(out, out)
            else:
                from torchedge.kernels.portable.activation import gelu

                gelu(out.copy(), "none", out)
        elif activation == "silu":  # x / (1 + exp(-x)), as ATen (and the silu kernel) compute it
            denominator = np.negative(out)
            np.exp(denominator, out=denominator)
            denominator += 1
            out /= denominator
        else:
            fail("torchedge_fused", f"unknown activation {activation!r} (expected one of {list(ACTIVATIONS)})")


def _conv_bn_act_shape(
    op: str,
    input,
    weight,
    bias,
    stride,
    padding,
    padding_after,
    dilation,
    groups,
    bn_weight,
    bn_bias,
    bn_mean,
    bn_var,
    eps,
    activation,
    low,
    high,
    out,
) -> list[tuple]:
    """(N, C, *S) by (O, C/G, *k), zeros ``padding`` before and ``padding_after`` after each spatial dim."""
    spatial = weight.ndim - 2
    check(
        input.ndim == spatial + 2 and input.shape[1] == weight.shape[1] * groups,
        op,
        f"input shape {list(input.shape)} does not match weight shape {list(weight.shape)} and groups={groups}",
    )
    size = tuple(
        (i + p + q - d * (k - 1) - 1) // s + 1
        for i, k, s, p, q, d in zip(input.shape[2:], weight.shape[2:], stride, padding, padding_after, dilation)
    )
    check(min(size, default=1) > 0, op, f"the kernel {list(weight.shape[2:])} is larger than the padded input")
    return [(input.shape[0], weight.shape[0]) + size]


@register_kernel("torchedge_fused::conv_bn_act.out", shape=_conv_bn_act_shape)
@per_call
def conv_bn_act(
    input,
    weight,
    bias,
    stride,
    padding,
    padding_after,
    dilation,
    groups,
    bn_weight,
    bn_bias,
    bn_mean,
    bn_var,
    eps,
    activation,
    low,
    high,
    out,
):
    """``activation(batch_norm(convolution(pad(input))))``: ``padding`` and ``padding_after`` are
    the zeros before and after the input along each spatial dim; the batch norm is skipped
    when ``bn_mean`` is None."""
    op = f"{NAMESPACE}::conv_bn_act.out"
    dtype = check_float(op, input, weight, bias, out)
    spatial = weight.ndim - 2
    check(
        1 <= spatial <= 3 and input.ndim == spatial + 2,
        op,
        f"expects a batched input and a weight of one spatial rank, got {list(input.shape)} and {list(weight.shape)}",
    )
    check(
        len(stride) == len(padding) == len(padding_after) == len(dilation) == spatial,
        op,
        f"stride {list(stride)}, padding {list(padding)}, padding_after {list(padding_after)} and dilation "
        f"{list(dilation)} must have {spatial} values each",
    )
    check(
        activation in ACTIVATIONS and activation not in ("gelu", "silu"),
        op,
        f"activation must be 'none', 'relu' or 'hardtanh', got {activation!r}",
    )
    if bn_mean is not None:
        check(bn_var is not None, op, "a batch norm needs both its running mean and variance")
        weight, bias = derived(_fold_batch_norm, (weight, bias, bn_weight, bn_bias, bn_mean, bn_var), eps, dtype)
    conv_forward(
        input,
        weight,
        bias,
        tuple(stride),
        tuple(padding),
        tuple(dilation),
        groups,
        out,
        padding_after=tuple(padding_after),
    )
    _activate(out, activation, low, high)


# -- linear + activation -----------------------------------------------------------------------


def _linear_act_shape(op: str, input, weight, bias, activation, out) -> list[tuple]:
    """(M, K) @ (K, N): (M, N)."""
    return [product_shape(op, input.shape, weight.shape, 2)]


def _prepare_linear_act(input, weight, bias, activation, out):
    """`linear_act`'s checks; its arithmetic."""
    op = f"{NAMESPACE}::linear_act.out"
    check_float(op, input, weight, bias, out)
    check(
        input.ndim == 2
        and weight.ndim == 2
        and input.shape[1] == weight.shape[0]
        and out.shape == (input.shape[0], weight.shape[1]),
        op,
        f"shapes {list(input.shape)} @ {list(weight.shape)} do not give out's {list(out.shape)}",
    )
    check(
        activation in ACTIVATIONS and activation != "hardtanh",
        op,
        f"activation must be 'none', 'relu', 'gelu' or 'silu', got {activation!r}",
    )
    return _linear_act


@register_kernel("torchedge_fused::linear_act.out", shape=_linear_act_shape)
@prepared(_prepare_linear_act)
def linear_act(input, weight, bias, activation, out):
    """``activation(input @ weight + bias)`` for a (M, K) input and a (K, N) weight (``addmm``'s
    operands: the weight is already transposed)."""
    arguments = (input, weight, bias, activation, out)
    _prepare_linear_act(*arguments)(*arguments)


def _linear_act(input, weight, bias, activation, out) -> None:
    target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    np.matmul(input, weight, out=target)
    with quiet():
        if bias is not None:
            np.add(target, bias, out=target)
    _activate(target, activation, 0.0, 0.0)
    if target is not out:
        write(out, target)
