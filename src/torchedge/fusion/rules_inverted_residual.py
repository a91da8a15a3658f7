"""The inverted residual rule: MobileNetV2's block (a 1x1 expansion and its clamp, a depthwise
convolution with the zeros padded before it and its clamp, a 1x1 projection) as
``torchedge_fused::inverted_residual``, one kernel that keeps the expanded channels
channels-last. Each convolution is a forward ``convolution`` (a clamp after it its own step)
or a ``conv_bn_act`` without batch norm (a program made with ``fuse_kernels=True``); a clamp
after the projection stays a step of its own. At load only (the kernel has no torch definition)."""

from __future__ import annotations

import math

from torchedge.fusion.pattern import Const, Either, Match, Maybe, Op, Var
from torchedge.fusion.rule import FLOATS, Rule, number, steps_label
from torchedge.fusion.rules_convolution import expanded, padded_sides

__all__ = ["INVERTED_RESIDUAL_RULES"]

_CONVOLUTION, _CONV_BN_ACT = "aten::convolution", "torchedge_fused::conv_bn_act"
_PARTS = ("expand", "depthwise", "project")


def _convolutions(part: str, input, activation=None) -> list[Op]:
    """Convolution ``part`` reading ``input``: a forward ``convolution``, or a ``conv_bn_act``
    without batch norm (with ``activation`` when given)."""
    common: dict = {"input": input, "weight": Var(f"{part}_weight"), "bias": Var(f"{part}_bias")}
    common |= {n: Const(f"{part}_{n}") for n in ("stride", "padding", "dilation", "groups")}
    fused: dict = {"padding_after": Const(f"{part}_after"), "bn_mean": None, "low": Const(f"{part}_low")}
    fused |= {"high": Const(f"{part}_high"), "activation": activation or Const(f"{part}_activation")}
    return [Op(_CONVOLUTION, name=part, transposed=False, **common), Op(_CONV_BN_ACT, name=part, **fused, **common)]


def _clamped(part: str, input) -> Either:
    """Convolution ``part`` with the clamp after it (``relu``, ``hardtanh``, ``clamp``), or without."""
    convolution, fused = _convolutions(part, input)
    low, high = Const(f"{part}_low"), Const(f"{part}_high")
    return Either(
        Op("aten::relu", name=f"{part}_clamp", self=convolution),
        Op("aten::hardtanh", name=f"{part}_clamp", self=convolution, min_val=low, max_val=high),
        Op("aten::clamp", name=f"{part}_clamp", self=convolution, min=low, max=high),
        convolution,
        fused,
    )


_EXPANDED = Var("expanded", _clamped("expand", Var("input")))
_PAD = Op("aten::constant_pad_nd", name="pad", self=_EXPANDED, pad=Const("pads"), value=Const("fill"))
_HIDDEN = Var("hidden", _clamped("depthwise", Maybe(_PAD, through="self")))
BLOCK = Either(*_convolutions("project", _HIDDEN, activation="none"))


def _tensor(found: Match, name: str):
    """The tensor bound as ``name``, None for an absent optional one."""
    ref = found[name]
    return None if ref is None or found.graph.constant(ref) is None else ref


def _geometry(found: Match, part: str) -> tuple | None:
    """(stride, zeros before, zeros after, dilation) of convolution ``part``, per spatial dim."""
    if found.operator(found.nodes[part]) == "conv_bn_act":
        if part == "depthwise" and "pad" in found.nodes:
            return None  # (its padding is its own)
        return tuple(tuple(found[f"{part}_{n}"]) for n in ("stride", "padding", "after", "dilation"))
    weight = found.graph.shape(found[f"{part}_weight"])
    spatial = 0 if weight is None else len(weight) - 2
    stride, padding, dilation = (expanded(found[f"{part}_{n}"], spatial) for n in ("stride", "padding", "dilation"))
    if spatial < 1 or stride is None or padding is None or dilation is None:
        return None
    if min(padding) < 0 or min(stride) < 1 or min(dilation) < 1:
        return None
    before, after = tuple(padding), tuple(padding)
    if part == "depthwise" and "pad" in found.nodes:
        pads, fill = found["pads"], found["fill"]
        sides = padded_sides(padding, pads) if len(pads) == 2 * spatial else None
        if sides is None or not number(fill) or fill != 0:
            return None
        before, after = tuple(sides[0]), tuple(sides[1])
    return tuple(stride), before, after, tuple(dilation)


def _bounds(found: Match, part: str):
    """The clamp's (low, high) after convolution ``part``, None for none, False where it is not one."""
    if found.operator(found.nodes[part]) == "conv_bn_act":
        clamps = {"none": None, "relu": (0, None), "hardtanh": (found[f"{part}_low"], found[f"{part}_high"])}
        return clamps.get(found[f"{part}_activation"], False)
    clamp = found.nodes.get(f"{part}_clamp")
    if clamp is None:
        return None
    if found.operator(clamp) == "relu":
        return 0, None
    bounds = found[f"{part}_low"], found[f"{part}_high"]
    return bounds if bounds != (None, None) and all(b is None or number(b) for b in bounds) else False


def _pointwise(found: Match, part: str, geometry) -> bool:
    """A 1x1 convolution of one group, unit stride, no padding."""
    stride, before, after, _ = geometry
    weight = found.graph.shape(found[f"{part}_weight"])
    unit = weight is not None and tuple(weight[2:]) == (1, 1) and stride == (1, 1)
    return found[f"{part}_groups"] == 1 and unit and not any(before + after)


def _guard(found: Match) -> bool:
    """Float tensors of one dtype, a 4-D input, the depthwise convolution one 2-D filter per
    channel (more than one), the expansion and projection pointwise, clamps by numbers."""
    g = found.graph
    dtype = g.dtype(found["input"])
    tensors = [t for p in _PARTS for t in (_tensor(found, f"{p}_weight"), _tensor(found, f"{p}_bias")) if t is not None]
    if dtype not in FLOATS or any(g.dtype(t) != dtype for t in tensors):
        return False
    x, hidden, weight = (g.shape(found[n]) for n in ("input", "expanded", "depthwise_weight"))
    if x is None or hidden is None or weight is None or not len(x) == len(hidden) == len(weight) == 4:
        return False
    expand, depthwise, project = (_geometry(found, p) for p in _PARTS)
    if expand is None or depthwise is None or project is None or any(_bounds(found, p) is False for p in _PARTS[:2]):
        return False
    if not (weight[1] == 1 and found["depthwise_groups"] == weight[0] == hidden[1] > 1):
        return False
    return _pointwise(found, "expand", expand) and _pointwise(found, "project", project)


def _arguments(found: Match) -> dict:
    stride, before, after, dilation = _geometry(found, "depthwise")  # type: ignore[misc]  # (the guard checked it)
    tensors = {f"{p}_{n}": _tensor(found, f"{p}_{n}") for p in _PARTS for n in ("weight", "bias")}
    return {
        "input": found["input"],
        **tensors,
        "expand_bounds": _bounds(found, "expand"),
        "stride": list(stride),
        "padding": list(before),
        "padding_after": list(after),
        "dilation": list(dilation),
        "depthwise_bounds": _bounds(found, "depthwise"),
    }


def _pays(found: Match) -> bool:
    """Depthwise output planes of at most the tuned ``inverted_residual_max_positions``: larger
    ones have long planar rows, and the three convolutions win. (The table is read here, not at
    import: it lives with the optimized kernels, which import NumPy, and so does the kernel.)"""
    from torchedge.kernels.optimized.tuning import tuned

    positions = math.prod(found.graph.shape(found["hidden"])[2:])  # type: ignore[index]
    return positions <= tuned("inverted_residual_max_positions")


INVERTED_RESIDUAL_RULES = (
    Rule(
        "inverted_residual",
        "all",
        """MobileNetV2's expansion, depthwise convolution and projection (their paddings and
        clamps) as ``torchedge_fused::inverted_residual``: the same products and sums, the
        expanded channels kept channels-last on small planes. Its GEMMs and depthwise sums run
        over other layouts than the three convolutions', so they may add in another order: an
        output differs from theirs by at most ``2 * (Cin + kh * kw + C + 3) * eps`` times the
        block evaluated on the absolute values of its input, weights and biases (clamps left
        out; Cin input and C expanded channels, eps of the dtype), to first order in eps.""",
        "torchedge_fused::inverted_residual",
        BLOCK,
        _guard,
        _arguments,
        _pays,
        label=steps_label,
        stages=("load",),
        reads_first=("input",),
    ),
)
