"""Graph helpers the kernel-fusion matchers share: node tests, `replace_with_fused`, which swaps a
matched chain for one fused node, and the ahead-of-time adapter of `torchedge.fusion`'s rules:
`FxGraph` (the FX graph as the pattern matcher's `Graph`) and `apply_rule`."""

from __future__ import annotations

import operator

import torch
from torch._guards import detect_fake_mode
from torch._subclasses.fake_tensor import FakeTensor

from torchedge.errors import InternalError
from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.fusion.pattern import MISSING
from torchedge.fusion.rules import Rule

__all__ = [
    "meta_val",
    "is_call",
    "only_user",
    "is_float_tensor",
    "is_static",
    "fake_call",
    "fake_result",
    "shape_of",
    "replace_with_fused",
    "replace_with_fused_results",
    "take_over_results",
    "erase_matched",
    "FxGraph",
    "apply_rule",
]

_aten = torch.ops.aten


def fake_result(target, args, kwargs=None):
    """``target``'s result on the meta values of ``args`` and ``kwargs`` (nodes), in their fake
    mode; a real tensor among them (the value a constant scalar's node holds) is made fake in it."""
    args, kwargs = torch.fx.node.map_arg((tuple(args), dict(kwargs or {})), lambda n: n.meta["val"])
    tensors = [v for v in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor)]
    mode = detect_fake_mode(tensors)
    if mode is None:
        raise InternalError(f"no fake value among the inputs of a new {target} node")

    def fake(value):
        return (
            mode.from_tensor(value) if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor) else value
        )

    args, kwargs = torch.utils._pytree.tree_map(fake, (args, kwargs))
    with mode:
        return target(*args, **kwargs)


def fake_call(graph: torch.fx.Graph, target, *args) -> torch.fx.Node:
    """A new node before the insertion point, its meta value computed from its inputs' fake values."""
    node = graph.call_function(target, args)
    node.meta["val"] = fake_result(target, args)
    return node


_FLOATS = (torch.float32, torch.float64)


def meta_val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def is_call(node, *targets) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def only_user(node: torch.fx.Node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def is_float_tensor(node) -> bool:
    val = meta_val(node)
    return isinstance(val, torch.Tensor) and val.dtype in _FLOATS


def is_static(node) -> bool:
    val = meta_val(node)
    return isinstance(val, torch.Tensor) and all(isinstance(s, int) for s in val.shape)


def shape_of(node) -> tuple:
    return tuple(meta_val(node).shape)


def replace_with_fused(graph: torch.fx.Graph, last: torch.fx.Node, target, args, matched: list) -> torch.fx.Node:
    """Insert ``target(*args)`` before ``last``, give it last's users and meta, erase ``matched``."""
    with graph.inserting_before(last):
        fused = graph.call_function(target, tuple(args))
    fused.meta["val"] = last.meta["val"]
    inherit_debug_info(fused, last)
    last.replace_all_uses_with(fused)
    erase_matched(graph, matched)
    return fused


def replace_with_fused_results(graph: torch.fx.Graph, lasts: list, target, args, matched: list) -> torch.fx.Node:
    """`replace_with_fused` for an operator with several results: ``target(*args)`` goes after the
    earliest of ``lasts`` (its results' producers, which its arguments precede), and result i
    takes over lasts[i] (see `take_over_results`)."""
    with graph.inserting_after(min(lasts, key=_position(graph))):
        fused = graph.call_function(target, tuple(args))
    fused.meta["val"] = tuple(last.meta["val"] for last in lasts)
    inherit_debug_info(fused, lasts[0])
    take_over_results(graph, fused, lasts)
    erase_matched(graph, matched)
    return fused


def take_over_results(graph: torch.fx.Graph, call: torch.fx.Node, replaced: list) -> None:
    """Give ``call``'s result i, a ``getitem`` inserted after it, the users, meta and debug
    handles of ``replaced[i]``."""
    anchor = call
    for index, node in enumerate(replaced):
        with graph.inserting_after(anchor):
            anchor = graph.call_function(operator.getitem, (call, index))
        anchor.meta["val"] = node.meta["val"]
        inherit_debug_info(anchor, node)
        node.replace_all_uses_with(anchor)


def erase_matched(graph: torch.fx.Graph, matched: list) -> None:
    """Erase the matched nodes a fusion left without users, users before what they use."""
    for node in sorted(set(matched), key=_position(graph), reverse=True):
        if not node.users:
            graph.erase_node(node)


def _position(graph: torch.fx.Graph):
    order = {node: i for i, node in enumerate(graph.nodes)}
    return order.__getitem__


class FxGraph:
    """An FX graph as a `torchedge.fusion.pattern.Graph`: a node is a ``call_function`` node, a
    reference is an argument as the node holds it (a node or a Python value), found by its schema
    name (a default where the call leaves it out). Plain copies are ``view_copy`` and ``expand_copy``
    to the input's own shape (`apply_rule` checks that nothing outside a match reads them)."""

    def operator(self, node) -> str | None:
        schema = _schema(node)
        return None if schema is None else schema.name

    def argument(self, node, name: str):
        schema = _schema(node)
        for position, argument in enumerate(schema.arguments):
            if argument.name != name:
                continue
            if argument.kwarg_only or position >= len(node.args):
                if name in node.kwargs:
                    return node.kwargs[name]
                return argument.default_value if argument.has_default_value() else MISSING
            return node.args[position]
        return MISSING

    def producer(self, ref):
        return ref if _schema(ref) is not None else None

    def constant(self, ref):
        return MISSING if isinstance(ref, torch.fx.Node) else ref

    def copied(self, node):
        same_shape = is_call(node, _aten.expand_copy.default) and shape_of(node) == shape_of(node.args[0])
        return node.args[0] if same_shape or is_call(node, _aten.view_copy.default) else None

    def same(self, a, b) -> bool:
        return a is b

    def item(self, ref) -> tuple | None:
        return (ref.args[0], ref.args[1]) if is_call(ref, operator.getitem) else None

    def order(self, node) -> int:
        return next(i for i, n in enumerate(node.graph.nodes) if n is node)

    def readers(self, node) -> tuple:
        return tuple(None if user.op == "output" else user for user in node.users)

    def shape(self, ref) -> tuple | None:
        return shape_of(ref) if is_static(ref) else None

    def dtype(self, ref) -> str | None:
        val = meta_val(ref)
        return str(val.dtype).removeprefix("torch.") if isinstance(val, torch.Tensor) else None


def _schema(node):
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    return getattr(node.target, "_schema", None)


def apply_rule(graph: torch.fx.Graph, rule: Rule, node: torch.fx.Node, ops: dict) -> bool:
    """Apply ``rule`` at ``node`` (its pattern's root) with the fused operator ``ops`` names
    (functional ``OpOverload`` by name): the matched nodes become one call where only the last
    one's result (and the rule's ``results``) is read outside them, trying the rule's shorter
    matches where a longer one's nodes are read outside it. The copies reshaping the root's result
    (``view_copy``) that only lead to the fused operator's result shape are taken in too; with
    ``rule.replaces``, the call takes that node's place instead (see `torchedge.fusion.rule.Rule`)."""
    if rule.arguments is None:
        return False
    found = rule.find(FxGraph(), node)
    if found is None or not rule.guard(found) or not rule.pays(found):
        return False
    for candidate in rule.candidates(found):
        target = ops[rule.operator(candidate).split("::")[1]]
        arguments = rule.arguments(candidate)
        names = [a.name for a in target._schema.arguments]
        if set(arguments) != set(names):
            raise TypeError(f"rule {rule.name!r} gives {sorted(arguments)}, {target} takes {names}")
        args = tuple(arguments[n] for n in names)
        results = [node, *(candidate.nodes[n] for n in rule.results if n in candidate.nodes)]
        if _replace(graph, rule, candidate, results, target, args):
            return True
    return False


def _replace(graph: torch.fx.Graph, rule: Rule, found, results: list, target, args: tuple) -> bool:
    """Replace ``found``'s nodes by ``target(*args)`` (see `apply_rule`) when nothing outside them
    reads the others' results."""
    computed = _meta_call(target, args)
    shapes = [tuple(t.shape) for t in (computed if isinstance(computed, (tuple, list)) else [computed])]
    group = list(found.group) + [user for n in found.group for user in n.users if is_call(user, operator.getitem)]
    if len(results) > 1:
        read_outside = any(not set(n.users) <= set(group) for n in group if n not in results)
        if [shape_of(n) for n in results] != shapes or read_outside:
            return False
        replace_with_fused_results(graph, results, target, args, group)
        return True
    (shape,), last = shapes, results[0]
    if rule.replaces is not None:
        return _replace_inner(graph, found.nodes[rule.replaces], last, group, target, args, shape)
    while shape_of(last) != shape and is_call(only_user(last), _aten.view_copy.default):
        last = only_user(last)
        group.append(last)
    if shape_of(last) != shape or any(not set(n.users) <= set(group) for n in group if n is not last):
        return False
    replace_with_fused(graph, last, target, args, group)
    return True


def _replace_inner(graph: torch.fx.Graph, inner, root, group: list, target, args, shape: tuple) -> bool:
    """``target(*args)`` in place of ``inner`` (of its shape); the elementwise ``root`` goes, its
    users reading its argument that sees ``inner``'s result (through the copies, which stay)."""
    if shape_of(inner) != shape or any(not set(n.users) <= set(group) for n in group if n is not root):
        return False
    seen = next(a for a in root.args if _reaches(a, inner))
    fused = replace_with_fused(graph, inner, target, args, [inner])
    root.replace_all_uses_with(fused if seen is inner else seen)
    erase_matched(graph, [n for n in group if n is not inner])
    return True


def _reaches(ref, node) -> bool:
    """Whether ``ref`` is ``node``'s result, maybe through plain copies."""
    while ref is not None and ref is not node:
        ref = FxGraph().copied(ref) if isinstance(ref, torch.fx.Node) else None
    return ref is node


def _meta_call(target, args):
    """``target`` on meta tensors of the arguments' shapes and dtypes."""
    meta = [torch.empty(shape_of(a), dtype=meta_val(a).dtype, device="meta") if is_float_tensor(a) else a for a in args]
    with torch.no_grad():
        return target(*meta)
