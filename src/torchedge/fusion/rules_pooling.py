"""The pooling rule: ``max_pool2d_with_indices`` / ``max_pool3d_with_indices`` whose indices
nothing reads as ``torchedge_fused::max_pool_values`` (at load only: ahead of time, export
already writes ``max_pool2d`` without indices where nothing reads them, the form the real
ExecuTorch runs)."""

from __future__ import annotations

from torchedge.fusion.pattern import Const, Either, Match, Op, Var
from torchedge.fusion.rule import Rule

__all__ = ["POOLING_RULES"]


def _max_pool(dims: int) -> Op:
    return Op(
        f"aten::max_pool{dims}d_with_indices",
        self=Var("input"),
        kernel_size=Const("kernel_size"),
        stride=Const("stride"),
        padding=Const("padding"),
        dilation=Const("dilation"),
        ceil_mode=Const("ceil_mode"),
    )


def _arguments(found: Match) -> dict:
    names = ("kernel_size", "stride", "padding", "dilation", "ceil_mode")
    dims = 2 if found.operator() == "max_pool2d_with_indices" else 3
    return {"self": found["input"], **{n: found[n] for n in names}, "dims": dims}


POOLING_RULES = (
    Rule(
        "max_pool_values",
        "exact",
        """Max pooling whose indices nothing reads as ``torchedge_fused::max_pool_values``: one
        maximum per tap instead of the maximum and its index (the same maxima).""",
        "torchedge_fused::max_pool_values",
        Either(_max_pool(2), _max_pool(3)),
        arguments=_arguments,
        label=lambda found: f"aten::{found.operator()}.out (values only)",
        stages=("load",),
    ),
)
