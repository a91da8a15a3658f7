"""The gated delta rule of linear-attention LLMs (``llama::gated_delta_rule`` and its deprecated
name ``llama::channelwise_gated_delta_rule``), as ExecuTorch's ``extension/llm/custom_ops``
computes it.

Shapes: query ``[B, Hq, T, K]``, key ``[B, Hkv, T, K]``, value ``[B, Hkv, T, V]``, decay
``[B, Hkv, T, K]`` (one per state row) or ``[B, Hkv, T]`` (one per token), beta ``[B, Hkv, T]``,
initial_state ``[B, Hkv, K, V]``; every group of ``Hq / Hkv`` query heads reads one state.
Per token: ``S = Diag(decay) S``; ``delta = beta (v - S^T k)``; ``S = S + k (x) delta``;
``o = S^T q``. The outputs are o ``[B, Hq, T, V]`` and the final state.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.registry import register_kernel

__all__ = ["gated_delta_rule"]

_F32 = np.dtype(np.float32)


def _shapes(op: str, query, key, value, decay, beta, initial_state) -> None:
    for name, t in (("query", query), ("key", key), ("value", value), ("initial_state", initial_state)):
        check(t.ndim == 4, op, f"{name} must be 4-D, got shape {list(t.shape)}")
        check(t.dtype == _F32, op, f"{name} must be float32, got {t.dtype}")
    check(decay.ndim in (3, 4) and decay.dtype == _F32, op, "decay must be float32 [B, Hkv, T, K] or [B, Hkv, T]")
    check(beta.ndim == 3 and beta.dtype == _F32, op, "beta must be float32 [B, Hkv, T]")
    b, hkv, t, k = key.shape
    check(query.shape[0] == b and query.shape[2:] == (t, k), op, "query and key must match in batch/seq/head-dim")
    check(decay.shape == (key.shape if decay.ndim == 4 else key.shape[:3]), op, "decay does not fit key")
    check(value.shape[:3] == key.shape[:3], op, "key and value must match in batch/head/seq dims")
    check(beta.shape == key.shape[:3], op, "beta must match key's batch/head/seq dims")
    check(hkv > 0 and query.shape[1] % hkv == 0, op, "query heads must be divisible by key/value heads")
    check(initial_state.shape == (b, hkv, k, value.shape[3]), op, "initial_state must be [B, Hkv, K, V]")


def _gated_delta_rule_shape(op: str, query, key, value, decay, beta, initial_state, out, final_state_out):
    _shapes(op, query, key, value, decay, beta, initial_state)
    return [query.shape[:3] + (value.shape[3],), initial_state.shape]


@register_kernel(
    "llama::gated_delta_rule.out", "llama::channelwise_gated_delta_rule.out", shape=_gated_delta_rule_shape
)
def gated_delta_rule(query, key, value, decay, beta, initial_state, out, final_state_out):
    op = "llama::gated_delta_rule.out"
    _shapes(op, query, key, value, decay, beta, initial_state)
    batch, q_heads, steps, _ = query.shape
    kv_heads = key.shape[1]
    group = q_heads // kv_heads
    state = initial_state.astype(_F32, copy=True)  # [B, Hkv, K, V]
    result = np.empty((batch, q_heads, steps, value.shape[3]), _F32)
    with quiet():
        for t in range(steps):
            k_t = key[:, :, t]  # [B, Hkv, K]
            d_t = decay[:, :, t] if decay.ndim == 4 else decay[:, :, t, None]
            state *= d_t[..., None]
            v_pred = np.einsum("bhkv,bhk->bhv", state, k_t)
            delta = (value[:, :, t] - v_pred) * beta[:, :, t, None]
            state += k_t[..., None] * delta[:, :, None, :]
            q_t = query[:, :, t].reshape(batch, kv_heads, group, -1)  # [B, Hkv, G, K]
            result[:, :, t] = np.einsum("bhkv,bhgk->bhgv", state, q_t).reshape(batch, q_heads, -1)
    write(out, result)
    write(final_state_out, state)
