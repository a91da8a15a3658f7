"""The attention rules: the math decomposition of ``scaled_dot_product_attention`` as one fused
kernel, bit-identical (``attention``) or faster within a bound (``fast_attention``)."""

from __future__ import annotations

import math

from torchedge.fusion.pattern import Const, Copies, Match, Maybe, Op, Same, Var
from torchedge.fusion.rule import FLOATS, Rule, number

__all__ = ["ATTENTION", "ATTENTION_RULES"]

# The math decomposition of scaled_dot_product_attention: bmm(safe_softmax(q*s @ (kᵀ*s) [+ mask]), v),
# each bmm operand behind plain copies (expands to their own shape, views, contiguous clones).
_SCALED_QUERY = Op("aten::mul", self=Var("query"), other=Const("q_scale", number))
_TRANSPOSED_KEY = Op("aten::permute_copy", name="transpose", self=Var("key"), dims=Const("permutation"))
_SCALED_KEY = Op("aten::mul", self=_TRANSPOSED_KEY, other=Const("k_scale", number))
_PRODUCT = Op("aten::bmm", self=Copies(_SCALED_QUERY), mat2=Copies(_SCALED_KEY))
_SCORES = Maybe(Op("aten::add", self=Copies(_PRODUCT), other=Var("mask"), alpha=1), through="self", name="scores")
_FULLY_MASKED = Op(
    "aten::logical_not",
    self=Op(
        "aten::any",
        self=Op("aten::logical_not", self=Op("aten::eq", self=Same("scores"), other=-math.inf)),
        dim=Const("any_dim"),
        keepdim=True,
    ),
)
_SAFE_SOFTMAX = Op(
    "aten::where",
    other=Op("aten::_softmax", name="probs", self=_SCORES, dim=Const("dim"), half_to_float=False),
    self=Op("aten::full_like", self=Same("probs"), fill_value=0),
    condition=_FULLY_MASKED,
)
ATTENTION = Op("aten::bmm", self=Copies(_SAFE_SOFTMAX), mat2=Copies(Var("value")))


def _attention_guard(found: Match) -> bool:
    """Float (..., S, D) operands of one dtype, ranks of at least 3, the softmax over the last
    dim, kᵀ the swap of the key's last two dims, a mask of their dtype broadcasting to the scores."""
    g = found.graph
    query, key, value = (g.shape(found[n]) for n in ("query", "key", "value"))
    if query is None or key is None or value is None:
        return False
    rank = len(query)
    if rank < 3 or len(key) != rank or len(value) != rank:
        return False
    if key[:-2] != query[:-2] or value[:-2] != query[:-2] or key[-1] != query[-1] or value[-2] != key[-2]:
        return False
    dtype = g.dtype(found["query"])
    if dtype not in FLOATS or g.dtype(found["key"]) != dtype or g.dtype(found["value"]) != dtype:
        return False
    last = (-1, rank - 1)
    if found["dim"] not in last or found["any_dim"] not in last:
        return False
    if tuple(found["permutation"]) != (*range(rank - 2), rank - 1, rank - 2):
        return False
    mask = found["mask"]
    if mask is None:
        return True
    weights = g.shape(mask)
    if weights is None or g.dtype(mask) != dtype or len(weights) > rank:
        return False
    scores = (*query[:-1], key[-2])
    padded = (1,) * (rank - len(weights)) + tuple(weights)
    return all(w in (1, s) for w, s in zip(padded, scores))


def _fast_attention_arguments(found: Match) -> dict:
    scale = float(found["q_scale"]) * float(found["k_scale"])
    return {
        "query": found["query"],
        "key": found["key"],
        "value": found["value"],
        "mask": found["mask"],
        "scale": scale,
    }


def _exact_attention_arguments(found: Match) -> dict:
    return {
        "query": found["query"],
        "key": found["key"],
        "value": found["value"],
        "mask": found["mask"],
        "q_scale": float(found["q_scale"]),
        "k_scale": float(found["k_scale"]),
    }


ATTENTION_RULES = (
    Rule(
        "fast_attention",
        "all",
        """The decomposed attention as ``torchedge_fused::attention``: the two scales multiplied into
        one (applied to q), exp of the unshifted scores (a row is redone shifted by its maximum only
        where its sum falls out of range), the softmax's sum dividing the (Sq, Dv) result instead
        of the (Sq, Sk) weights. Not bit-identical to the steps: each output element is within a
        few units in the last place of the steps' result (relative error about (Sk + D) * 2^-24 in
        float32, from the reassociated scale and the late division), and both are equally close
        to the exact attention.""",
        "torchedge_fused::attention",
        ATTENTION,
        _attention_guard,
        _fast_attention_arguments,
    ),
    Rule(
        "attention",
        "exact",
        """The decomposed attention as ``torchedge_fused::attention_exact``: the steps' own
        arithmetic (q and kᵀ scaled apart, their product, the mask, the max-shifted softmax
        multiplying by the reciprocal of its sum, zeros for fully masked rows, the product with
        the values) a few heads at a time, so that the scores stay in the cache: bit-identical.""",
        "torchedge_fused::attention_exact",
        ATTENTION,
        _attention_guard,
        _exact_attention_arguments,
    ),
)
