"""Kernel fusion of attention: the math decomposition of ``scaled_dot_product_attention`` becomes
``torchedge_fused::attention(q, k, v, mask, scale)``, or ``attention_interleaved`` where the
queries, keys and values are each a (..., S, H, D) projection moved to (..., H, S, D) by a
``permute_copy`` only the attention reads, and the result goes straight back the same way: the
kernel reads and writes the interleaved layout in place, and the four copies go."""

from __future__ import annotations

import math

import torch

from torchedge.exir.passes.fusion_matching import (
    identity_expand,
    is_call,
    is_float_tensor,
    is_static,
    meta_val,
    only_user,
    replace_with_fused,
    scaled,
    shape_of,
    through_view_of_identity_expand,
)

__all__ = ["fuse_attention", "interleave_heads"]

_aten = torch.ops.aten


def fuse_attention(graph: torch.fx.Graph, where: torch.fx.Node, ops: dict) -> bool:
    """Match, from the safe-softmax ``where``, the SDPA math decomposition:

    ``where(logical_not(any(logical_not(eq(S, -inf)), -1)), full_like(P, 0), P)`` with
    ``P = _softmax(S, -1)``, ``S = view(bmm(A, B)) [+ mask]``, ``A = view(expand(q [* s]))``,
    ``B = view(expand(permute(k, [.., -1, -2]) [* s]))``; its result feeds
    ``view(bmm(view(expand(where)), view(expand(v))))``.
    """
    if len(where.args) != 3:
        return False
    cond, zeros, probs = where.args
    if not (
        is_call(probs, _aten._softmax.default)
        and is_call(zeros, _aten.full_like.default)
        and zeros.args[0] is probs
        and zeros.args[1] == 0
        and len(zeros.users) == 1
        and set(probs.users) == {zeros, where}
    ):
        return False
    scores = probs.args[0]
    rank = len(shape_of(scores))
    if rank < 3 or probs.args[1] not in (-1, rank - 1) or probs.args[2]:
        return False
    # the condition: no score of the row is finite
    chain = [cond]
    if not (is_call(cond, _aten.logical_not.default) and len(cond.users) == 1):
        return False
    anything = cond.args[0]
    if not (
        is_call(anything, _aten.any.dim)
        and len(anything.users) == 1
        and anything.args[1] in (-1, rank - 1)
        and (anything.args[2] if len(anything.args) > 2 else anything.kwargs.get("keepdim", False))
    ):
        return False
    finite = anything.args[0]
    if not (is_call(finite, _aten.logical_not.default) and len(finite.users) == 1):
        return False
    infinite = finite.args[0]
    if not (
        is_call(infinite, _aten.eq.Scalar)
        and len(infinite.users) == 1
        and infinite.args[0] is scores
        and infinite.args[1] == -math.inf
    ):
        return False
    chain += [anything, finite, infinite]
    if set(scores.users) != {probs, infinite}:
        return False
    # the scores: view(bmm(A, B)) [+ mask]
    mask, matched = None, [where, zeros, probs, *chain]
    product = scores
    if is_call(scores, _aten.add.Tensor) and len(scores.args) == 2 and not scores.kwargs:
        product, mask = scores.args
        if not (is_float_tensor(mask) and meta_val(mask).dtype == meta_val(scores).dtype):
            return False
        matched.append(scores)
    if not (is_call(product, _aten.view_copy.default) and (product is scores or len(product.users) == 1)):
        return False
    bmm = product.args[0]
    if not (is_call(bmm, _aten.bmm.default) and len(bmm.users) == 1):
        return False
    matched += [product, bmm]
    q_scaled, a_nodes = through_view_of_identity_expand(bmm.args[0])
    kt_scaled, b_nodes = through_view_of_identity_expand(bmm.args[1])
    if q_scaled is None or kt_scaled is None:
        return False
    query, q_scale, q_nodes = scaled(q_scaled)
    transposed, k_scale, k_nodes = scaled(kt_scaled)
    if not (is_call(transposed, _aten.permute_copy.default) and len(transposed.users) == 1):
        return False
    dims = list(transposed.args[1])
    n = len(dims)
    if dims != list(range(n - 2)) + [n - 1, n - 2] or n != rank:
        return False
    key = transposed.args[0]
    matched += [*a_nodes, *b_nodes, *q_nodes, *k_nodes, transposed]
    # the weighted sum of the values: view(bmm(view(expand(where)), view(expand(v))))
    user = only_user(where)
    if user is None or identity_expand(user) is None:
        return False
    flat = only_user(user)
    if not is_call(flat, _aten.view_copy.default):
        return False
    second = only_user(flat)
    if not (is_call(second, _aten.bmm.default) and second.args[0] is flat):
        return False
    value, v_nodes = through_view_of_identity_expand(second.args[1])
    result = only_user(second)
    if value is None or not is_call(result, _aten.view_copy.default):
        return False
    shapes = [shape_of(x) for x in (query, key, value, result)]
    if not all(len(s) == rank for s in shapes) or shapes[0][:-2] != shapes[1][:-2] or shapes[3][:-1] != shapes[0][:-1]:
        return False
    if not all(
        is_float_tensor(x) and is_static(x) and meta_val(x).dtype == meta_val(query).dtype for x in (query, key, value)
    ):
        return False
    matched += [user, flat, second, *v_nodes, result]
    replace_with_fused(graph, result, ops["attention"], (query, key, value, mask, q_scale * k_scale), matched)
    return True


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
