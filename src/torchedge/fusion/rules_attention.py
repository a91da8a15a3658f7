"""The attention rules: the math decomposition of ``scaled_dot_product_attention`` as one fused
kernel, bit-identical (``attention``) or faster within a bound (``fast_attention``); its safe
softmax's masking alone where the rest runs elsewhere (``safe_softmax_rows``, at load)."""

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


def _safe_softmax(probs, zeros_of, scores) -> Op:
    """``where(all(scores == -inf, any_dim), zeros_of's zeros, probs)``: the safe softmax's zeros
    for the rows whose scores are all -inf (``logical_not(any(logical_not(eq(...))))``)."""
    fully_masked = Op(
        "aten::logical_not",
        self=Op(
            "aten::any",
            self=Op("aten::logical_not", self=Op("aten::eq", self=scores, other=-math.inf)),
            dim=Const("any_dim"),
            keepdim=True,
        ),
    )
    return Op(
        "aten::where", other=probs, self=Op("aten::full_like", self=zeros_of, fill_value=0), condition=fully_masked
    )


_PROBS = Op("aten::_softmax", name="probs", self=_SCORES, dim=Const("dim"), half_to_float=False)
ATTENTION = Op(
    "aten::bmm", self=Copies(_safe_softmax(_PROBS, Same("probs"), Same("scores"))), mat2=Copies(Var("value"))
)
# The masking alone, where the scores and their softmax come from elsewhere (an XNNPACK program
# computes them in one delegate and the product with the values in the next).
_SAFE_SOFTMAX_ROWS = _safe_softmax(Var("probs"), Var("probs"), Var("scores"))


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


def _safe_softmax_rows_guard(found: Match) -> bool:
    """Float scores and probabilities of one shape and dtype, masked along one of their dims."""
    g = found.graph
    shape, dtype, dim = g.shape(found["probs"]), g.dtype(found["probs"]), found["any_dim"]
    if shape is None or g.shape(found["scores"]) != shape or g.dtype(found["scores"]) != dtype:
        return False
    return dtype in FLOATS and type(dim) is int and -len(shape) <= dim < len(shape)


def _safe_softmax_rows_arguments(found: Match) -> dict:
    return {"scores": found["scores"], "probs": found["probs"], "dim": found["any_dim"]}


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
    Rule(
        "safe_softmax_rows",
        "exact",
        """The safe softmax's masking where the rest of the attention is not among the steps (an
        XNNPACK program's delegates compute it): ``eq``, ``logical_not``, ``any``, ``logical_not``,
        ``full_like`` and ``where`` as ``torchedge_fused::safe_softmax_rows``, which copies the
        probabilities and zeros the rows whose scores' maximum is -inf (exactly the rows of all
        -inf scores: a nan makes the maximum nan): the bits of the steps.""",
        "torchedge_fused::safe_softmax_rows",
        _SAFE_SOFTMAX_ROWS,
        _safe_softmax_rows_guard,
        _safe_softmax_rows_arguments,
        stages=("load",),
        reads_first=("scores",),
    ),
)
