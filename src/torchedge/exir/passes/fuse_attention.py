"""Kernel fusion of attention's layout: the rule that turns the math decomposition of
``scaled_dot_product_attention`` into ``torchedge_fused::attention(q, k, v, mask, scale)`` is
written once in `torchedge.fusion.rules` (``fast_attention``); here, ``attention_interleaved`` where the
queries, keys and values are each a (..., S, H, D) projection moved to (..., H, S, D) by a
``permute_copy`` only the attention reads, and the result goes straight back the same way: the
kernel reads and writes the interleaved layout in place, and the four copies go."""

from __future__ import annotations

import torch

from torchedge.exir.passes.fusion_matching import is_call, only_user, replace_with_fused

__all__ = ["interleave_heads"]

_aten = torch.ops.aten


def interleave_heads(graph: torch.fx.Graph, attention: torch.fx.Node, ops: dict) -> bool:
    """Turn ``permute(attention(permute(q), permute(k), permute(v)))``, each permute exchanging
    heads and tokens and read by nothing else, into ``attention_interleaved(q, k, v)``. Runs after
    the copy chains around the heads have collapsed (`collapse_copies`) to single permutes."""
    query, key, value, *rest = attention.args
    back = only_user(attention)
    moves = (query, key, value, back)
    if not all(_swaps_heads_and_tokens(x) and len(x.users) == 1 for x in moves):
        return False
    args = (query.args[0], key.args[0], value.args[0], *rest)
    replace_with_fused(graph, back, ops["attention_interleaved"], args, [back, attention, query, key, value])
    return True


def _swaps_heads_and_tokens(node) -> bool:
    """A ``permute_copy`` that exchanges the second- and third-last dims of a 4-D or larger tensor."""
    if not is_call(node, _aten.permute_copy.default):
        return False
    n = len(node.args[1])
    return n >= 4 and list(node.args[1]) == [*range(n - 3), n - 2, n - 3, n - 1]
