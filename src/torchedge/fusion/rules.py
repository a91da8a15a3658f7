"""Every fusion rule, written once: its name, level, pattern, guard, fused operator and cost.

`torchedge.exir.passes.kernel_fusion` applies these to the FX graph ahead of time (where the
fused operator is a ``torchedge_fused`` operator there) and `torchedge.runtime.fusion` to a
loaded program's steps (where the operator has a kernel). Each family of rules has its module
(`rules_attention`, `rules_recurrent`, `rules_inverted_residual`, `rules_convolution`,
`rules_linear`, `rules_pooling`, `rules_copies`); adding a rule is adding it there (and a new family to `RULES`
here, once). A rule's ``level`` says what it promises:

* ``exact``: the fused kernel gives the bits of the steps it replaces, so a program runs the
  same with and without it (and as the real ExecuTorch runs it);
* ``all``: faster arithmetic that may round differently, within the bound its docstring states.

A guard or an ``arguments`` function that raises is a bug (tests see it); one that declines
returns False / None.
"""

from __future__ import annotations

from torchedge.fusion.rule import Rule
from torchedge.fusion.rules_attention import ATTENTION_RULES
from torchedge.fusion.rules_convolution import CONVOLUTION_RULES
from torchedge.fusion.rules_copies import COPY_RULES
from torchedge.fusion.rules_inverted_residual import INVERTED_RESIDUAL_RULES
from torchedge.fusion.rules_linear import LINEAR_RULES
from torchedge.fusion.rules_pooling import POOLING_RULES
from torchedge.fusion.rules_recurrent import RECURRENT_RULES

__all__ = ["LEVELS", "Rule", "RULES", "rule_names"]

LEVELS = ("none", "exact", "all")

# The rules, in the order they claim nodes (larger groups first).
RULES: tuple[Rule, ...] = (
    *ATTENTION_RULES,
    *RECURRENT_RULES,
    *INVERTED_RESIDUAL_RULES,
    *CONVOLUTION_RULES,
    *LINEAR_RULES,
    *POOLING_RULES,
    *COPY_RULES,
)


def rule_names() -> list[str]:
    return [r.name for r in RULES]
