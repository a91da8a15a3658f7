"""Fusion rules written once (pattern, guard, fused operator, cost), applied ahead of time to the
FX graph (`torchedge.exir.passes.kernel_fusion`) and at load to a program's steps
(`torchedge.runtime.fusion`). NumPy-free and torch-free: `pattern` is the language, `rule` what a
rule is, `rules` the rules (one ``rules_<family>`` module per family), `options` the levels and
switches."""

from torchedge.fusion.options import DEFAULT_LEVEL, FusionOptions, fusion_options
from torchedge.fusion.pattern import Const, Copies, Either, Match, Maybe, Op, Same, Var, match
from torchedge.fusion.rules import LEVELS, RULES, Rule

__all__ = [
    "DEFAULT_LEVEL",
    "LEVELS",
    "RULES",
    "Const",
    "Copies",
    "Either",
    "FusionOptions",
    "Match",
    "Maybe",
    "Op",
    "Rule",
    "Same",
    "Var",
    "fusion_options",
    "match",
]
