"""What one fusion rule is: its name, level, pattern (or matcher), guard, fused operator,
arguments and cost (`Rule`); the rules themselves are in `torchedge.fusion.rules`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torchedge.fusion.pattern import Either, Graph, Match, Op, match

__all__ = ["FLOATS", "STAGES", "Rule", "number", "steps_label"]

FLOATS = ("float32", "float64")  # the dtypes of the fused kernels
STAGES = ("aot", "load")  # ahead of time on the FX graph, at load on a program's steps


def _always(found: Match) -> bool:
    return True


def number(value) -> bool:
    """A Python int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def steps_label(found: Match) -> str:
    """The group's operators, in order: ``constant_pad_nd.out + convolution.out + relu.out (fused at load)``."""
    return " + ".join(f"{found.operator(n)}.out" for n in sorted(found.group)) + " (fused at load)"


@dataclass(frozen=True)
class Rule:
    """One fusion: where ``pattern`` matches and ``guard`` accepts, the nodes it covered become one
    call of ``fused`` with ``arguments(match)`` (named; values bound by the match or Python
    values), wherever ``pays(match)``.

    ``matcher``: the escape for a computation the pattern language cannot write (a chain of
    any length): a function ``matcher(graph, node) -> Match | None`` in the rule's own module,
    asking ``graph`` only what a pattern may ask (`torchedge.fusion.pattern.Graph`), with
    ``roots`` the operators its root node calls; the adapters treat its `Match` as a pattern's.

    ``replaces``: the name of a node of the pattern whose result the fused operator computes, in
    its shape, when that is not the root's (``linear_act`` computes ``relu(addmm(...))`` in the
    product's shape; the root is an elementwise call on its ``self`` argument, the product seen
    through copies): ahead of time the fused call takes that node's place and the copies between
    it and the root stay. ``label(match)``: the fused step's label at load (by default the fused
    operator and the rule's name). ``stages``: where the rule applies (`STAGES`; a rule whose
    fused operator has no torch definition is ``("load",)``). ``reads_first``: the tensor
    arguments the fused kernel reads in full before it writes its result, so that memory
    planning may have put the result over them (at load, any other overlap goes through scratch
    memory). ``pick(match)``: the fused operator for a match, for a rule with several (``fused``
    then names none). ``results``: names of matched nodes whose results the fused operator
    writes too, where the match binds them (its ``out0`` takes the root's, ``out1`` the first
    of these, ...). ``shorter(match)``: a smaller match to try where an adapter cannot replace
    the group a match covers (a recurrent step's slice of its layer's input projections: at load
    it ran long before the cell, as a rule), None when there is none."""

    name: str
    level: str
    doc: str
    fused: str = ""
    pattern: Op | Either | None = None
    guard: Callable[[Match], bool] = _always
    arguments: Callable[[Match], dict] | None = None
    pays: Callable[[Match], bool] = _always
    replaces: str | None = None
    label: Callable[[Match], str] | None = None
    matcher: Callable[[Graph, object], Match | None] | None = None
    roots: tuple[str, ...] = ()
    stages: tuple[str, ...] = STAGES
    reads_first: tuple[str, ...] = ()
    pick: Callable[[Match], str] | None = None
    results: tuple[str, ...] = ()
    shorter: Callable[[Match], Match | None] | None = None

    def __post_init__(self):
        if self.pattern is not None and self.matcher is not None:
            raise TypeError(f"rule {self.name!r} has both a pattern and a matcher")
        if (self.matcher is None) == bool(self.roots) or not set(self.stages) <= set(STAGES):
            raise TypeError(f"rule {self.name!r}: roots go with a matcher; stages are among {STAGES}")

    @property
    def anchors(self) -> tuple[str, ...]:
        """The operators the pattern's (or the matcher's) root calls."""
        return self.roots if self.pattern is None else self.pattern.operators

    def find(self, graph: Graph, node) -> Match | None:
        """What the rule matches with ``node`` as its root (before its guard and cost)."""
        if self.pattern is not None:
            return match(self.pattern, graph, node)
        return None if self.matcher is None else self.matcher(graph, node)

    def candidates(self, found: Match) -> list[Match]:
        """``found`` and the shorter matches to try in turn where its group cannot be replaced."""
        shorter = None if self.shorter is None else self.shorter(found)
        return [found] if shorter is None else [found, shorter]

    def operator(self, found: Match) -> str:
        """The fused operator ``found`` becomes."""
        return self.fused if self.pick is None else self.pick(found)

    def describe(self, found: Match) -> str:
        """The label of the fused step ``found`` becomes at load."""
        return f"{self.operator(found)}.out ({self.name}, fused at load)" if self.label is None else self.label(found)
