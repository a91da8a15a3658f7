"""Kernels of ExecuTorch's LLM custom operators (``extension/llm/custom_ops``): the KV-cache
update (``llama::update_cache``), scaled dot-product attention over a cache
(``llama::custom_sdpa``, ``llama::sdpa_with_kv_cache``, ``llama::custom_quantized_sdpa``),
the SpinQuant ``llama::fast_hadamard_transform``, ``llama::fallback`` and the image
preprocessing ``preprocess::tile_crop``.

Layouts are ExecuTorch's: query, key, value and caches are ``[batch, seq, heads, head_dim]``
(``is_seq_at_dim_2`` puts seq after heads). ``start_pos`` is the position of the first query
token: with no ``attn_mask`` the attention reads the first ``start_pos + seq_len`` cache rows,
and ``is_causal`` lets query ``i`` see the keys up to ``start_pos + i``. The caches are
mutated arguments: the kernels write them in place; ``update_cache``'s out is a placeholder
that ExecuTorch leaves untouched, and so do we.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.portable.shape_rules import same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "update_cache",
    "update_cache_with_indices",
    "custom_sdpa",
    "sdpa_with_kv_cache",
    "custom_quantized_sdpa",
    "fast_hadamard_transform",
    "fallback",
    "tile_crop",
]

_F32 = np.dtype(np.float32)
_FLOATS = ("float32", "float16", "bfloat16")


# -- KV-cache updates ------------------------------------------------------------------------


def _check_cache(op: str, value: np.ndarray, cache: np.ndarray, start_pos: int, indices=None) -> None:
    check(value.ndim == 4 and cache.ndim == 4, op, "value and cache must be 4-D [batch, seq, heads, head_dim]")
    check(
        value.shape[0] == cache.shape[0] and value.shape[2:] == cache.shape[2:],
        op,
        f"value of shape {list(value.shape)} does not fit cache of shape {list(cache.shape)}",
    )
    check(value.dtype.itemsize == cache.dtype.itemsize, op, "value and cache must have the same element size")
    if indices is None:
        check(
            0 <= start_pos and start_pos + value.shape[1] <= cache.shape[1],
            op,
            f"start_pos {start_pos} + seq_len {value.shape[1]} exceeds the cache's {cache.shape[1]} positions",
        )


def _placeholder_shape(op: str, value, cache, start_pos, *rest) -> list[tuple]:
    return [(1,)]


@register_kernel("llama::update_cache.out", shape=_placeholder_shape)
def update_cache(value, cache, start_pos, out):
    """``cache[:, start_pos : start_pos + seq_len] = value`` in place."""
    _check_cache("llama::update_cache.out", value, cache, start_pos)
    cache[:, start_pos : start_pos + value.shape[1]] = value.view(cache.dtype)


@register_kernel("llama::update_cache_with_indices.out", shape=_placeholder_shape)
def update_cache_with_indices(value, cache, start_pos, indices, out):
    """``cache[b, indices[b, s]] = value[b, s]`` in place, in order (a repeated index keeps the last)."""
    op = "llama::update_cache_with_indices.out"
    _check_cache(op, value, cache, start_pos, indices)
    check(
        indices.ndim == 2 and indices.shape == value.shape[:2],
        op,
        f"indices of shape {list(indices.shape)} must be [batch, seq] = {list(value.shape[:2])}",
    )
    if indices.size and (indices.min() < 0 or indices.max() >= cache.shape[1]):
        fail(op, f"index out of bounds: not in [0, {cache.shape[1]})")
    source = value.view(cache.dtype)
    for b in range(value.shape[0]):
        for s in range(value.shape[1]):
            cache[b, int(indices[b, s])] = source[b, s]


# -- attention -------------------------------------------------------------------------------


def _attention(op, q, k, v, start_pos, attn_mask, is_causal, scale, seq_at_dim_2=False) -> np.ndarray:
    """float32 attention of [B, S, H, D] (or [B, H, S, D]) inputs; the result in q's layout."""
    check(q.ndim == 4 and k.ndim == 4 and v.ndim == 4, op, "query, key and value must be 4-D")
    check(attn_mask is None or not is_causal, op, "attn_mask and is_causal cannot be set at the same time")
    if not seq_at_dim_2:
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    batch, heads, seq_len, dim = q.shape
    kv_heads, kv_size = k.shape[1], k.shape[2]
    check(k.shape == v.shape and k.shape[0] == batch and k.shape[3] == dim, op, "key and value do not fit query")
    check(kv_heads > 0 and heads % kv_heads == 0, op, f"{heads} query heads for {kv_heads} key/value heads")
    if attn_mask is None:
        keys = start_pos + seq_len
        check(0 < keys <= kv_size, op, f"start_pos {start_pos} + seq_len {seq_len} exceeds {kv_size} keys")
        kv_size = keys
    else:
        check(
            attn_mask.ndim == 2 and attn_mask.shape == (seq_len, kv_size),
            op,
            f"attn_mask must be 2-D [{seq_len}, {kv_size}], got shape {list(attn_mask.shape)}",
        )
    group = heads // kv_heads
    k = np.repeat(k[:, :, :kv_size].astype(_F32), group, axis=1)
    v = np.repeat(v[:, :, :kv_size].astype(_F32), group, axis=1)
    factor = _F32.type(1.0 / math.sqrt(dim) if scale is None else scale)
    with quiet():
        scores = np.matmul(q.astype(_F32) * factor, k.transpose(0, 1, 3, 2))
        if attn_mask is not None:
            scores += attn_mask.astype(_F32)
        elif is_causal:
            allowed = np.arange(kv_size)[None, :] <= (start_pos + np.arange(seq_len))[:, None]
            scores = np.where(allowed, scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        result = np.matmul(scores, v)
    return result if seq_at_dim_2 else result.transpose(0, 2, 1, 3)


def _query_shape(op: str, query, *rest) -> list[tuple]:
    return [query.shape]


@register_kernel("llama::custom_sdpa.out", shape=_query_shape)
def custom_sdpa(query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale, out):
    op = "llama::custom_sdpa.out"
    check(query.dtype.name in _FLOATS, op, f"query must be a float tensor, got {query.dtype}")
    write(out, _attention(op, query, key, value, start_pos, attn_mask, is_causal, scale))


@register_kernel("llama::sdpa_with_kv_cache.out", shape=_query_shape)
def sdpa_with_kv_cache(
    query, key, value, key_cache, value_cache, start_pos, seq_len, attn_mask, drpout_p, is_causal, scale, out
):
    """Write key and value into the caches at ``start_pos``, then attend over the caches."""
    op = "llama::sdpa_with_kv_cache.out"
    check(key_cache.shape == value_cache.shape, op, "key_cache and value_cache must have the same shape")
    check(
        0 <= start_pos and start_pos + seq_len <= key_cache.shape[1],
        op,
        f"start_pos {start_pos} + seq_len {seq_len} exceeds the cache's {key_cache.shape[1]} positions",
    )
    update_cache(key, key_cache, start_pos, None)
    update_cache(value, value_cache, start_pos, None)
    custom_sdpa(query, key_cache, value_cache, start_pos, attn_mask, drpout_p, is_causal, scale, out)


def _dequantize(op: str, x: np.ndarray, zero_points, scales, what: str) -> np.ndarray:
    check(x.dtype == np.int8, op, f"{what} must be int8, got {x.dtype}")
    check(zero_points is not None and scales is not None, op, f"{what} needs its scales and zero points")
    check(scales.shape[:-1] == x.shape[:-1], op, f"{what} scales of shape {list(scales.shape)} do not fit")
    with quiet():
        return (x.astype(_F32) - zero_points.astype(_F32)) * scales.astype(_F32)


@register_kernel("llama::custom_quantized_sdpa.out", shape=_query_shape)
def custom_quantized_sdpa(
    query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale,
    q_zero_points, q_scales, k_zero_points, k_scales, v_zero_points, v_scales, is_seq_at_dim_2, out,
):  # fmt: skip
    """Attention over int8 query, key and value quantized per token (one scale and zero point
    per [batch, seq, head] row), or over float ones when query is not int8."""
    op = "llama::custom_quantized_sdpa.out"
    if query.dtype == np.int8:
        query = _dequantize(op, query, q_zero_points, q_scales, "query")
        key = _dequantize(op, key, k_zero_points, k_scales, "key")
        value = _dequantize(op, value, v_zero_points, v_scales, "value")
    write(out, _attention(op, query, key, value, start_pos, attn_mask, is_causal, scale, is_seq_at_dim_2))


# -- Hadamard transform ----------------------------------------------------------------------

# The 28 x 28 Hadamard matrix of ExecuTorch's spinquant/fast_hadamard_transform_special.h.
_HAD_28 = """
+------++----++-+--+-+--++-- -+-----+++-----+-+--+-+--++- --+-----+++---+-+-+----+--++
---+-----+++---+-+-+-+--+--+ ----+-----+++---+-+-+++--+-- -----+-----++++--+-+--++--+-
------++----++-+--+-+--++--+ --++++-+-------++--+++-+--+- ---++++-+-----+-++--+-+-+--+
+---+++--+----++-++--+-+-+-- ++---++---+----++-++--+-+-+- +++---+----+----++-++--+-+-+
++++--------+-+--++-++--+-+- -++++--------+++--++--+--+-+ -+-++-++--++--+--------++++-
+-+-++--+--++--+--------++++ -+-+-++--+--++--+----+---+++ +-+-+-++--+--+---+---++---++
++-+-+-++--+------+--+++---+ -++-+-+-++--+------+-++++--- +-++-+---++--+------+-++++--
-++--++-+-++-+++----++------ +-++--++-+-++-+++-----+----- ++-++---+-+-++-+++-----+----
-++-++-+-+-+-+--+++-----+--- --++-++++-+-+----+++-----+-- +--++-+-++-+-+----+++-----+-
++--++-+-++-+-+----++------+
"""
HADAMARD_28 = np.array([[1.0 if c == "+" else -1.0 for c in row] for row in _HAD_28.split()], _F32)


def _walsh_hadamard(x: np.ndarray) -> np.ndarray:
    """The normalized Walsh-Hadamard transform of the last dim (a power of two), each butterfly
    rounded to x's dtype (float32 or float16) as ExecuTorch's loops round them."""
    n = x.shape[-1]
    lead = x.shape[:-1]
    dtype = x.dtype.type
    y = x.reshape(-1, n).copy()
    step = 1
    with quiet():
        while step < n:
            pairs = y.reshape(-1, n // (2 * step), 2, step)
            a, b = pairs[:, :, 0, :], pairs[:, :, 1, :]
            y = np.stack([a + b, a - b], axis=2).reshape(-1, n)
            step *= 2
        log2 = n.bit_length() - 1
        root = dtype(1 << (log2 // 2)) * (dtype(math.sqrt(2)) if log2 % 2 else dtype(1))
        y *= dtype(1) / root
    return y.reshape(lead + (n,))


def _mix_28(rows: np.ndarray) -> np.ndarray:
    """``HADAMARD_28 @ rows`` over the (28, n) trailing dims, each sum accumulated in float32
    from the first term to the last, as ExecuTorch's generated code does."""
    x = rows.astype(_F32)
    mixed = np.empty(x.shape, _F32)
    with quiet():
        for i in range(28):
            acc = x[..., 0, :] * HADAMARD_28[i, 0]
            for j in range(1, 28):
                acc = acc + x[..., j, :] if HADAMARD_28[i, j] > 0 else acc - x[..., j, :]
            mixed[..., i, :] = acc
    return mixed


@register_kernel("llama::fast_hadamard_transform.out", shape=same_as())
def fast_hadamard_transform(mat, out):
    """The normalized fast Walsh-Hadamard transform of the last dim, whose size is a power of
    two or 28 times one (then 28 transforms of the power-of-two rows, mixed by a 28x28
    Hadamard matrix, unnormalized, as ExecuTorch does)."""
    op = "llama::fast_hadamard_transform.out"
    check(mat.dtype == out.dtype, op, f"out dtype {out.dtype} must match mat dtype {mat.dtype}")
    check(mat.dtype.name in ("float32", "float16"), op, f"expects float32 or float16, got {mat.dtype}")
    if mat.ndim == 0 or mat.size == 0:
        return
    n = mat.shape[-1]
    by_28 = n % 28 == 0
    power = n // 28 if by_28 else n
    check(power & (power - 1) == 0, op, f"last dim {n} must be a power of 2 or 28 times one")
    if not by_28:
        write(out, _walsh_hadamard(mat))
        return
    rows = _walsh_hadamard(mat.reshape(mat.shape[:-1] + (28, power)))
    write(out, _mix_28(rows).reshape(mat.shape))


# -- others ----------------------------------------------------------------------------------


@register_kernel("llama::fallback.out", shape=same_as())
def fallback(input, output):
    """The identity: ``output`` is a copy of ``input``."""
    write(output, input)


def _tile_crop_shape(op: str, input, tile_size, out) -> list[tuple]:
    check(input.ndim == 3, op, f"input must be 3-D [channels, height, width], got shape {list(input.shape)}")
    check(tile_size > 0, op, f"tile_size must be positive, got {tile_size}")
    channels, height, width = input.shape
    check(
        height % tile_size == 0 and width % tile_size == 0,
        op,
        f"height {height} and width {width} must be multiples of tile_size {tile_size}",
    )
    return [((height // tile_size) * (width // tile_size), channels, tile_size, tile_size)]


@register_kernel("preprocess::tile_crop.out", shape=_tile_crop_shape)
def tile_crop(input, tile_size, out):
    """Cut a [C, H, W] image into [H/t * W/t, C, t, t] tiles, row of tiles by row of tiles."""
    (shape,) = _tile_crop_shape("preprocess::tile_crop.out", input, tile_size, out)
    channels, height, width = input.shape
    t = tile_size
    tiles = input.reshape(channels, height // t, t, width // t, t).transpose(1, 3, 0, 2, 4)
    write(out, tiles.reshape(shape))
