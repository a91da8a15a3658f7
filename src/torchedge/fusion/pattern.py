"""The pattern language fusion rules are written in, and the matcher that runs it over any graph.

A pattern describes the computation that produced a value, walking back from it: an operator
call with its arguments by schema name, each argument a pattern in turn or a literal it must
equal. The matcher knows nothing of FX nodes or loaded steps: a `Graph` adapter answers its
few questions (which operator a node calls, what an argument refers to, who produced it, who
reads a result, its value when fixed ahead of the run, whether a node is a plain copy, which of a
node's several results a reference reads, the order of nodes), so one
rule matches the FX graph ahead of time and a loaded program's steps at load.

>>> pattern = Op("aten::relu", self=Op("aten::addmm", name="product", self=Var("bias")))

The pieces:

* `Op` (``op``, ``name=``, ``commutative=``, ``**arguments``): a call of ``op`` ("aten::bmm":
  any overload) whose named arguments match; ``name`` binds the node, and a name bound
  twice must be the same node. ``commutative=True`` also tries the first two operands swapped.
* `Var` (name, pattern=None): any value (or one ``pattern`` matches), bound by name (a second
  `Var` of that name must be the same value).
* `Const` (name, test): a value fixed ahead of the run (a Python scalar, list or string, or a
  constant 0-d tensor), bound by name; ``test`` must accept it.
* `Same` (name): the value the node bound as ``name`` computed.
* `Copies` (pattern): zero or more plain copies (the adapter says which) in front of ``pattern``.
* `Maybe` (op, through): ``op``, or, where it does not match, what its argument ``through``
  would have matched (an optional node: ``scores [+ mask]``).
* `Either` (*alternatives): the first alternative that matches (a rule may have several roots:
  ``relu`` or ``gelu`` after a product).
* A literal (number, string, None, tuple): the argument is that constant.

A match returns a `Match`: the values, constants and nodes bound by name, and the group of
nodes the pattern covered. A rule that declines returns no match; an exception from a pattern
or a guard is a bug, never a skipped rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["MISSING", "Graph", "Pattern", "Op", "Var", "Const", "Same", "Copies", "Maybe", "Either", "Match", "match"]

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


class Graph(Protocol):
    """What the matcher asks of a graph. A *node* is an operator call; a *reference* is one
    argument of one node (what it reads), so that a graph whose memory is reused (loaded steps)
    can say which write a read sees."""

    def operator(self, node) -> str | None:
        """``"namespace::name"`` of the operator ``node`` calls (no overload), None for anything else."""

    def argument(self, node, name: str):
        """The reference to ``node``'s argument ``name``, `MISSING` if it has none."""

    def producer(self, ref):
        """The node that computed exactly the value ``ref`` reads, None when none did."""

    def constant(self, ref):
        """The value of ``ref`` when it is fixed before the run, else `MISSING`."""

    def copied(self, node):
        """The reference ``node`` copies unchanged when it is a plain copy, else None."""

    def same(self, a, b) -> bool:
        """Whether references ``a`` and ``b`` read the same value."""

    def item(self, ref) -> tuple | None:
        """``(node, index)`` when ``ref`` reads result ``index`` of ``node``, a call with a list of
        results (a split's chunk), else None."""

    def order(self, node) -> int:
        """``node``'s place in the graph's order of execution."""

    def readers(self, node) -> tuple:
        """The nodes that read ``node``'s result (its ``out``), None among them for a reader
        outside the graph (the program's outputs)."""

    def shape(self, ref) -> tuple | None:
        """The shape of the tensor ``ref`` reads, None when it is not a tensor of a fixed shape."""

    def dtype(self, ref) -> str | None:
        """The dtype name ("float32") of the tensor ``ref`` reads, None when it is not a tensor."""


class Pattern:
    """Base of the pattern pieces."""

    def match(self, graph: Graph, ref, found: Match) -> bool:
        raise NotImplementedError


@dataclass
class Match:
    """What a pattern bound: ``refs`` (`Var`), ``constants`` (`Const`), ``nodes`` (named `Op`),
    and ``group``, every node it covered (copies included)."""

    graph: Graph
    root: Any = None
    refs: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    group: list = field(default_factory=list)

    def __getitem__(self, name: str):
        """A bound constant, or else the reference bound as ``name`` (None when an optional part
        that binds it did not match)."""
        if name in self.constants:
            return self.constants[name]
        return self.refs.get(name)

    def operator(self, node=None) -> str:
        """The name of the operator matched ``node`` (the root by default) calls, without its
        namespace (``"relu"``)."""
        return str(self.graph.operator(self.root if node is None else node)).split("::")[-1]

    def _save(self) -> tuple:
        return dict(self.refs), dict(self.constants), dict(self.nodes), list(self.group)

    def _restore(self, saved: tuple) -> None:
        self.refs, self.constants, self.nodes, self.group = (type(x)(x) for x in saved)

    def _add(self, node) -> None:
        if node not in self.group:
            self.group.append(node)


def _same_constant(found, expected) -> bool:
    if isinstance(expected, tuple) and isinstance(found, (list, tuple)):
        return tuple(found) == expected
    if isinstance(expected, bool) or isinstance(found, bool):
        return found is expected
    return found == expected


def _argument(graph: Graph, ref, pattern, found: Match) -> bool:
    if isinstance(pattern, Pattern):
        return pattern.match(graph, ref, found)
    value = graph.constant(ref)
    return value is not MISSING and _same_constant(value, pattern)


class Op(Pattern):
    """A call of ``op`` whose named arguments match (see the module docstring)."""

    def __init__(self, op: str, /, *, name: str | None = None, commutative: bool = False, **arguments):
        self.op, self.name, self.commutative, self.arguments = op, name, commutative, arguments

    @property
    def operators(self) -> tuple[str, ...]:
        """The operator the pattern's root calls (as `Either.operators`)."""
        return (self.op,)

    def match(self, graph: Graph, ref, found: Match) -> bool:
        node = graph.producer(ref)
        return node is not None and self.match_node(graph, node, found)

    def match_node(self, graph: Graph, node, found: Match) -> bool:
        if graph.operator(node) != self.op:
            return False
        if self.name is not None:
            if self.name in found.nodes:
                return found.nodes[self.name] == node
            found.nodes[self.name] = node
        found._add(node)
        orders = [list(self.arguments)]
        if self.commutative:
            first, second, *rest = orders[0]
            orders.append([second, first, *rest])
            swapped = {first: second, second: first}
        saved = found._save()
        for order in orders:
            names = order if order is orders[0] else [swapped.get(n, n) for n in order]
            if all(self._argument_matches(graph, node, n, self.arguments[p], found) for n, p in zip(names, order)):
                return True
            found._restore(saved)
        return False

    @staticmethod
    def _argument_matches(graph: Graph, node, name: str, pattern, found: Match) -> bool:
        ref = graph.argument(node, name)
        return ref is not MISSING and _argument(graph, ref, pattern, found)


class Var(Pattern):
    """Any value (one ``pattern`` matches, when given), bound as ``name``."""

    def __init__(self, name: str, pattern=None):
        self.name, self.pattern = name, pattern

    def match(self, graph: Graph, ref, found: Match) -> bool:
        if self.name in found.refs and not graph.same(found.refs[self.name], ref):
            return False
        if self.pattern is not None and not _argument(graph, ref, self.pattern, found):
            return False  # (checked wherever the name appears: the first may be a plain `Var`)
        found.refs.setdefault(self.name, ref)
        return True


class Const(Pattern):
    """A value fixed before the run that ``test`` accepts, bound as ``name``."""

    def __init__(self, name: str, test: Callable[[Any], bool] | None = None):
        self.name, self.test = name, test

    def match(self, graph: Graph, ref, found: Match) -> bool:
        value = graph.constant(ref)
        if value is MISSING or (self.test is not None and not self.test(value)):
            return False
        if self.name in found.constants:
            return _same_constant(value, found.constants[self.name])
        found.constants[self.name] = value
        return True


class Same(Pattern):
    """The value that the node bound as ``name`` computed."""

    def __init__(self, name: str):
        self.name = name

    def match(self, graph: Graph, ref, found: Match) -> bool:
        node = found.nodes.get(self.name)
        return node is not None and graph.producer(ref) == node


class Copies(Pattern):
    """Zero or more plain copies, then ``pattern``: the longest chain of copies first (a `Var`
    behind copies binds the value copied, not a copy of it)."""

    def __init__(self, pattern):
        self.pattern = pattern

    def match(self, graph: Graph, ref, found: Match) -> bool:
        chain = [(ref, None)]
        while True:
            node = graph.producer(chain[-1][0])
            source = None if node is None else graph.copied(node)
            if source is None or any(node == copy for _, copy in chain):
                break
            chain.append((source, node))
        saved = found._save()
        for depth in range(len(chain) - 1, -1, -1):
            for _, copy in chain[1 : depth + 1]:
                found._add(copy)
            if _argument(graph, chain[depth][0], self.pattern, found):
                return True
            found._restore(saved)
        return False


class Maybe(Pattern):
    """``op``, or where it does not match, its argument ``through``'s pattern on the same value;
    ``name`` binds the node that computed the value either way."""

    def __init__(self, op: Op, through: str, name: str | None = None):
        self.op, self.through, self.name = op, through, name

    def match(self, graph: Graph, ref, found: Match) -> bool:
        saved = found._save()
        matched = self.op.match(graph, ref, found)
        if not matched:
            found._restore(saved)
            matched = _argument(graph, ref, self.op.arguments[self.through], found)
        if matched and self.name is not None:
            node = graph.producer(ref)
            if node is None or found.nodes.setdefault(self.name, node) != node:
                return False
        return matched


class Either(Pattern):
    """The first of ``alternatives`` (`Op` patterns) that matches."""

    def __init__(self, *alternatives: Op):
        self.alternatives = alternatives

    @property
    def operators(self) -> tuple[str, ...]:
        """The operators the alternatives call."""
        return tuple(dict.fromkeys(a.op for a in self.alternatives))

    def match(self, graph: Graph, ref, found: Match) -> bool:
        node = graph.producer(ref)
        return node is not None and self.match_node(graph, node, found)

    def match_node(self, graph: Graph, node, found: Match) -> bool:
        saved = found._save()
        for alternative in self.alternatives:
            if alternative.match_node(graph, node, found):
                return True
            found._restore(saved)
        return False


def match(pattern: Op | Either, graph: Graph, node) -> Match | None:
    """Match ``pattern`` with ``node`` as its root call: the `Match`, or None."""
    found = Match(graph, root=node)
    return found if pattern.match_node(graph, node, found) else None
