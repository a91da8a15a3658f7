"""The linear-layer rules: ``addmm`` / ``mm`` and the activation after it (the product maybe seen
in another shape) as ``torchedge_fused::linear_act``, which applies the activation in place
while the product is still in the cache."""

from __future__ import annotations

from torchedge.fusion.pattern import Copies, Either, Match, Op, Var
from torchedge.fusion.rule import FLOATS, Rule

__all__ = ["LINEAR_RULES"]

_PRODUCT = Copies(
    Either(
        Op("aten::addmm", name="product", self=Var("bias"), mat1=Var("input"), mat2=Var("weight"), beta=1, alpha=1),
        Op("aten::mm", name="product", self=Var("input"), mat2=Var("weight")),
    )
)
_ACTIVATED = Either(Op("aten::relu", self=_PRODUCT), Op("aten::gelu", self=_PRODUCT, approximate="none"))
# silu as its own operator, or as core ATen writes it: x * sigmoid(x)
_SILU = Either(
    Op("aten::silu", self=_PRODUCT),
    Op("aten::mul", commutative=True, self=Var("gated", _PRODUCT), other=Op("aten::sigmoid", self=Var("gated"))),
)


def _activation(found: Match) -> str:
    """The activation's name in `linear_act` terms, from the root's operator."""
    name = found.operator()
    return "silu" if name == "mul" else name


def _linear_guard(found: Match) -> bool:
    """A (M, K) input and (K, N) weight of one float dtype, a 1-d bias of that dtype (or none)."""
    g = found.graph
    input, weight, bias = found["input"], found["weight"], found["bias"]
    shapes = [g.shape(input), g.shape(weight)]
    dtype = g.dtype(input)
    if any(s is None or len(s) != 2 for s in shapes) or dtype not in FLOATS or g.dtype(weight) != dtype:
        return False
    if bias is None:
        return True
    shape = g.shape(bias)
    return shape is not None and len(shape) == 1 and g.dtype(bias) == dtype


def _linear_arguments(found: Match) -> dict:
    return {"input": found["input"], "weight": found["weight"], "bias": found["bias"], "activation": _activation(found)}


def _linear_rule(name: str, level: str, doc: str, pattern: Either) -> Rule:
    return Rule(
        name,
        level,
        doc,
        "torchedge_fused::linear_act",
        pattern,
        _linear_guard,
        _linear_arguments,
        replaces="product",
        label=lambda found: f"torchedge_fused::linear_act.out ({_activation(found)}, fused at load)",
    )


LINEAR_RULES = (
    _linear_rule(
        "linear_act",
        "exact",
        """``addmm`` / ``mm`` and ``relu`` or exact ``gelu`` as ``torchedge_fused::linear_act``: the
        same product, bias and activation kernels on the same values, so the same bits.""",
        _ACTIVATED,
    ),
    _linear_rule(
        "linear_silu",
        "all",
        """``addmm`` / ``mm`` and silu (``x * sigmoid(x)`` as core ATen writes it) as
        ``torchedge_fused::linear_act``: the kernel computes ``x / (1 + exp(-x))``, within 2 units in
        the last place of the steps' product.""",
        _SILU,
    ),
)
