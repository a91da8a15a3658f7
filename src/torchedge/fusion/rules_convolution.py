"""The convolution rule: the zero padding before a forward ``convolution`` and the clamp after it
(``relu``, ``hardtanh``, ``clamp`` by numbers) as ``torchedge_fused::conv_bn_act`` (no batch
norm: `torchedge.exir.passes.conv_folding` folds those into the weights). Zeros padded before a
convolution become its own padding in one place, `padded_sides`: here, per side, and in
`conv_folding`, where they are the same on both sides, as the convolution's own argument."""

from __future__ import annotations

import math

from torchedge.fusion.pattern import Const, Either, Match, Maybe, Op, Var
from torchedge.fusion.rule import FLOATS, Rule, number, steps_label

__all__ = ["CONVOLUTION_RULES", "PADDED_CONVOLUTION", "expanded", "padded_sides"]


def _positive_zero(value) -> bool:
    return number(value) and value == 0 and math.copysign(1.0, value) > 0


def padded_sides(padding: list, pad) -> tuple[list, list] | None:
    """The zeros before and after each spatial dim of a convolution with ``padding`` whose input
    ``constant_pad_nd`` padded by ``pad`` (pairs from the last dim backwards); None when ``pad``
    removes elements or covers more dims than the convolution's."""
    spatial = len(padding)
    if len(pad) % 2 or len(pad) > 2 * spatial or min(pad, default=0) < 0:
        return None
    before, after = list(padding), list(padding)
    for d in range(len(pad) // 2):
        before[spatial - 1 - d] += pad[2 * d]
        after[spatial - 1 - d] += pad[2 * d + 1]
    return before, after


_PAD = Op(
    "aten::constant_pad_nd", name="pad", self=Var("input"), pad=Const("pads"), value=Const("fill", _positive_zero)
)


def _convolution(input) -> Op:
    """A forward convolution reading ``input``."""
    return Op(
        "aten::convolution",
        input=input,
        weight=Var("weight"),
        bias=Var("bias"),
        stride=Const("stride"),
        padding=Const("padding"),
        dilation=Const("dilation"),
        transposed=False,
        groups=Const("groups"),
    )


_CONVOLUTION = _convolution(Maybe(_PAD, through="self"))
# A convolution reading zeros padded before it (`conv_folding` folds them when even).
PADDED_CONVOLUTION = _convolution(_PAD)
_BLOCK = Either(
    Op("aten::relu", self=_CONVOLUTION),
    Op("aten::hardtanh", self=_CONVOLUTION, min_val=Const("low", number), max_val=Const("high", number)),
    Op("aten::clamp", self=_CONVOLUTION, min=Const("low"), max=Const("high")),
    PADDED_CONVOLUTION,
)


def expanded(value, spatial: int) -> list | None:
    """An int-list argument given once for all spatial dims or once per dim, per dim."""
    values = [value] if isinstance(value, int) else list(value)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return values * spatial if len(values) == 1 else values if len(values) == spatial else None


def _geometry(found: Match) -> dict | None:
    """The fused kernel's geometry arguments (zeros before and after each dim, per dim), None
    when the convolution is not one it computes."""
    weight = found.graph.shape(found["weight"])
    spatial = 0 if weight is None else len(weight) - 2
    if not 1 <= spatial <= 3 or not isinstance(found["groups"], int):
        return None
    stride, padding, dilation = (expanded(found[n], spatial) for n in ("stride", "padding", "dilation"))
    if stride is None or padding is None or dilation is None:
        return None
    if min(padding) < 0 or min(stride) < 1 or min(dilation) < 1:
        return None
    sides = (padding, padding) if "pad" not in found.nodes else padded_sides(padding, found["pads"])
    if sides is None:
        return None
    return {"stride": stride, "padding": sides[0], "padding_after": sides[1], "dilation": dilation}


def _activation(found: Match) -> tuple[str, float, float] | None:
    """The clamp after the convolution as (activation, low, high); None for bounds that are not numbers."""
    name = found.operator()
    if name == "convolution":
        return "none", 0.0, 0.0
    if name == "relu":
        return "relu", 0.0, 0.0
    low, high = found["low"], found["high"]
    if (low is None and high is None) or not all(b is None or number(b) for b in (low, high)):
        return None
    return "hardtanh", -math.inf if low is None else float(low), math.inf if high is None else float(high)


def _block_guard(found: Match) -> bool:
    """A float convolution of 1 to 3 spatial dims, its input, weight and bias of one dtype and
    shapes that match, with zeros padded before it or a clamp after it (or both)."""
    g = found.graph
    input, weight, bias = found["input"], found["weight"], found["bias"]
    shape, dtype = g.shape(input), g.dtype(input)
    if shape is None or dtype not in FLOATS or any(g.dtype(t) != dtype for t in (weight, bias) if t is not None):
        return False
    geometry = _geometry(found)
    return (
        geometry is not None
        and len(shape) == len(geometry["stride"]) + 2
        and _activation(found) is not None
        and len(found.group) > 1
    )


def _block_arguments(found: Match) -> dict:
    activation, low, high = _activation(found)  # type: ignore[misc]  # (the guard checked it)
    return {
        "input": found["input"],
        "weight": found["weight"],
        "bias": found["bias"],
        **_geometry(found),  # type: ignore[dict-item]
        "groups": found["groups"],
        "bn_weight": None,
        "bn_bias": None,
        "bn_mean": None,
        "bn_var": None,
        "eps": 0.0,
        "activation": activation,
        "low": low,
        "high": high,
    }


CONVOLUTION_RULES = (
    Rule(
        "convolution_block",
        "exact",
        """Zeros from a ``constant_pad_nd`` before a forward ``convolution`` as its own padding, per
        side, and a clamp after it in place on its result (``torchedge_fused::conv_bn_act``): the
        convolution never reads the padded copy, and computes the same sums in the same order.""",
        "torchedge_fused::conv_bn_act",
        _BLOCK,
        _block_guard,
        _block_arguments,
        label=steps_label,
    ),
)
