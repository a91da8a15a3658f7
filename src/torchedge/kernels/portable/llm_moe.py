"""``llama::quantized_moe_ffn``: a mixture-of-experts feed-forward layer over weights packed
by torchao (``torchao::_pack_8bit_act_{4,8}bit_weight``), as ExecuTorch's
``extension/llm/custom_ops/op_moe.cpp`` computes it on its reference path (weights unpacked
and dequantized, float32 products).

Routing: ``scores = x @ gate_weight.T``; with ``score_func == "sigmoid"`` the scores go through
a sigmoid, the top ``num_activated_experts`` are chosen on ``scores + expert_bias`` (ties to the
lower index) and weighted by their scores times ``route_scale / sum``; with ``"softmax"`` the
chosen raw scores are softmaxed. Each expert computes ``w2 @ (silu(w1 x) * (w3 x))`` with
``w13 = [w1; w3]`` fused into one ``[2F, D]`` matrix.

A torchao blob is a 64-byte header, then blocks of ``nr = 8`` output rows: per group of
``group_size`` columns, ``group_size / 16`` chunks of 8 x 16 values bit-packed (4 bits: low
nibbles of 16 bytes, then their high nibbles, offset by 8; 8 bits: bytes) and interleaved in
``sr = 2`` halves, then 8 float32 scales and 8 int32 sums (unused here).
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.registry import register_kernel

__all__ = ["quantized_moe_ffn", "unpack_torchao_weights"]

_F32 = np.dtype(np.float32)
_HEADER_BYTES, _NR, _KR, _SR = 64, 8, 16, 2


def _unpack_chunks(chunks: np.ndarray, nbit: int) -> np.ndarray:
    """[..., 128 * nbit / 8] packed bytes -> [..., 128] int8 values (torchao's unpack_128)."""
    if nbit == 8:
        return chunks.view(np.int8)
    quads = chunks.reshape(chunks.shape[:-1] + (4, 16))
    low, high = (quads & 0x0F).astype(np.int8), (quads >> 4).astype(np.int8)
    return (np.concatenate([low, high], axis=-1) - 8).reshape(chunks.shape[:-1] + (128,))


def unpack_torchao_weights(blob: np.ndarray, n: int, k: int, group_size: int, nbit: int):
    """The int8 values ``[n, k]`` and scales ``[n, k / group_size]`` of a torchao blob."""
    op = "llama::quantized_moe_ffn.out"
    check(k % group_size == 0 and group_size % _KR == 0, op, f"group_size {group_size} does not fit k {k}")
    groups, chunks = k // group_size, group_size // _KR
    chunk_bytes = _NR * _KR * nbit // 8
    group_bytes = chunks * chunk_bytes + _NR * 8  # the chunks, 8 scales, 8 sums
    blocks = -(-n // _NR)
    need = _HEADER_BYTES + blocks * groups * group_bytes
    check(blob.size >= need, op, f"torchao packed blob has {blob.size} bytes, needs {need}")
    body = blob[_HEADER_BYTES:need].reshape(blocks, groups, group_bytes)
    packed = body[..., : chunks * chunk_bytes].reshape(blocks, groups, chunks, chunk_bytes)
    values = _unpack_chunks(np.ascontiguousarray(packed), nbit)  # [blocks, groups, chunks, 128]
    # packed order (sr half, row, 8 values) -> (row, sr half, 8 values)
    values = values.reshape(blocks, groups, chunks, _SR, _NR, _KR // _SR).transpose(0, 4, 1, 2, 3, 5)
    qvals = values.reshape(blocks * _NR, k)[:n]
    tail = np.ascontiguousarray(body[..., chunks * chunk_bytes : chunks * chunk_bytes + _NR * 4])
    scales = tail.view(np.float32).reshape(blocks, groups, _NR).transpose(0, 2, 1).reshape(blocks * _NR, groups)[:n]
    return qvals, scales


def _expert_linear(blob: np.ndarray, x: np.ndarray, n: int, k: int, group_size: int, nbit: int) -> np.ndarray:
    qvals, scales = unpack_torchao_weights(blob, n, k, group_size, nbit)
    weight = (qvals.astype(_F32).reshape(n, -1, group_size) * scales[..., None]).reshape(n, k)
    return x @ weight.T


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row, the indices of the ``k`` largest scores, largest first, ties to the lower index;
    NaN scores lose to every number (then to the lowest unchosen index)."""
    keyed = np.where(np.isnan(scores), -np.inf, scores)
    order = np.lexsort((np.arange(scores.shape[1])[None, :].repeat(len(scores), 0), -keyed), axis=-1)
    return order[:, :k]


def _sigmoid(v: np.ndarray) -> np.ndarray:
    with quiet():
        e = np.exp(-np.abs(v))
        return np.where(v >= 0, _F32.type(1) / (_F32.type(1) + e), e / (_F32.type(1) + e)).astype(_F32)


def _moe_shape(op: str, x, *rest) -> list[tuple]:
    check(x.ndim == 2, op, f"x must be 2-D [tokens, dim], got shape {list(x.shape)}")
    return [x.shape]


@register_kernel("llama::quantized_moe_ffn.out", shape=_moe_shape)
def quantized_moe_ffn(
    x, gate_weight, expert_bias, packed_w13, packed_w2, num_activated_experts, num_experts,
    hidden_dim, dim, group_size, weight_nbit, score_func, route_scale, out,
):  # fmt: skip
    op = "llama::quantized_moe_ffn.out"
    check(x.ndim == 2 and x.shape[1] == dim and x.dtype == _F32, op, "x must be float32 [tokens, dim]")
    check(gate_weight.shape == (num_experts, dim) and gate_weight.dtype == _F32, op, "gate_weight must be [E, D]")
    use_bias = expert_bias.size > 0
    check(not use_bias or expert_bias.shape == (num_experts,), op, "expert_bias must be [E] when provided")
    for name, blob in (("packed_w13", packed_w13), ("packed_w2", packed_w2)):
        check(blob.ndim == 2 and blob.shape[0] == num_experts and blob.dtype == np.uint8, op, f"bad {name}")
    check(0 < num_activated_experts <= num_experts, op, "num_activated_experts out of range")
    check(score_func in ("sigmoid", "softmax"), op, f"score_func must be sigmoid or softmax, got {score_func!r}")
    check(not (use_bias and score_func == "softmax"), op, "expert_bias is only supported with sigmoid")
    check(weight_nbit in (4, 8), op, f"weight_nbit must be 4 or 8, got {weight_nbit}")
    check(dim % group_size == 0 and hidden_dim % group_size == 0, op, "group_size must divide dim and hidden_dim")
    k = num_activated_experts
    with quiet():
        scores = x @ gate_weight.T  # [T, E]
        if score_func == "sigmoid":
            scores = _sigmoid(scores)
            chosen = _top_k(scores + expert_bias.astype(_F32) if use_bias else scores, k)
            weights = np.take_along_axis(scores, chosen, axis=1)
            total = np.maximum(weights.sum(axis=1, keepdims=True), np.finfo(_F32).tiny)
            weights = weights * (_F32.type(route_scale) / total)
        else:
            chosen = _top_k(scores, k)
            weights = np.take_along_axis(scores, chosen, axis=1)
            weights = np.exp(weights - weights.max(axis=1, keepdims=True))
            total = weights.sum(axis=1, keepdims=True)
            weights = weights * np.where(total > 0, _F32.type(1) / total, _F32.type(0))
        result = np.zeros(x.shape, _F32)
        for expert in range(num_experts):
            tokens, slots = np.nonzero(chosen == expert)
            if tokens.size == 0:
                continue
            h13 = _expert_linear(packed_w13[expert], x[tokens], 2 * hidden_dim, dim, group_size, weight_nbit)
            gate, up = h13[:, :hidden_dim], h13[:, hidden_dim:]
            mid = gate * _sigmoid(gate) * up
            y = _expert_linear(packed_w2[expert], mid, dim, hidden_dim, group_size, weight_nbit)
            np.add.at(result, tokens, weights[tokens, slots][:, None] * y)
    write(out, result)
