"""Which fusion rules run: a level (``none`` / ``exact`` / ``all``, as ONNX Runtime's optimization
levels) and rules switched off by name.

``Program.load_method(name, fuse=...)`` takes a level, a `FusionOptions`, or a bool (``True``:
`DEFAULT_LEVEL`; ``False``: ``none``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchedge.errors import InputError
from torchedge.fusion.rules import LEVELS, RULES, Rule, rule_names

__all__ = ["DEFAULT_LEVEL", "FusionOptions", "fusion_options"]

DEFAULT_LEVEL = "exact"  # the fused run gives the bits of the unfused one (and of ExecuTorch's)


@dataclass(frozen=True)
class FusionOptions:
    """``level``: ``none`` (every instruction as written), ``exact`` (only rules that give the
    bits of the steps they replace) or ``all`` (also those within a stated error bound);
    ``disabled``: names of rules not to apply (see `torchedge.fusion.rules.RULES`)."""

    level: str = DEFAULT_LEVEL
    disabled: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self):
        if self.level not in LEVELS:
            raise InputError(f"fusion level must be one of {', '.join(LEVELS)}, got {self.level!r}")
        disabled = frozenset([self.disabled] if isinstance(self.disabled, str) else self.disabled)
        unknown = sorted(disabled - set(rule_names()))
        if unknown:
            raise InputError(f"no fusion rule named {', '.join(map(repr, unknown))}; rules: {', '.join(rule_names())}")
        object.__setattr__(self, "disabled", disabled)

    def rules(self) -> list[Rule]:
        """The rules to apply, in order."""
        allowed = LEVELS[1 : LEVELS.index(self.level) + 1]
        return [r for r in RULES if r.level in allowed and r.name not in self.disabled]

    def enabled(self, name: str) -> bool:
        return any(r.name == name for r in self.rules())


def fusion_options(fuse) -> FusionOptions:
    """`FusionOptions` from a ``fuse`` argument: a bool, a level name or options."""
    if isinstance(fuse, FusionOptions):
        return fuse
    if fuse is True:
        return FusionOptions()
    if fuse is False or fuse is None:
        return FusionOptions("none")
    if isinstance(fuse, str):
        return FusionOptions(fuse)
    raise InputError(f"fuse must be a bool, one of {', '.join(LEVELS)} or FusionOptions, got {fuse!r}")
