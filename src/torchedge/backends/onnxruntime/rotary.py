"""Rotary position embedding as one ONNX Runtime kernel, ``com.microsoft::RotaryEmbedding``.

transformers rotates a layer's query and key heads ``x`` [b, n, s, d] as
``x * cos + cat(-x[..., d/2:], x[..., :d/2]) * sin``, seven ONNX nodes each, with ``cos`` and
``sin`` [1, 1, s, d] made as ``cos(cat(f, f))`` (times a scale): their two halves are equal.
ONNX Runtime's kernel reads one half, [s, d/2], rows from ``position_ids`` (one start, 0: row
``i`` for token ``i``) and computes the same products and sums (``x1 * c - x2 * s`` is ``x1 * c +
(-x2) * s``). `use_rotary_kernel` (run by the partitioner, where the whole graph shows where
``cos`` and ``sin`` come from) replaces each such sum by ``torchedge_ort::rotary_half(x,
cos_half, sin_half)`` when the halves are equal by construction: ``cos``/``sin`` are traced back
through elementwise steps (cos, sin, a dtype cast, a scalar product, an unsqueeze before the last
dimension) to a ``cat`` of one value with itself along the last dimension. The halves are
sliced once, next to the tables. The operator has no portable kernel: it is always delegated.
"""

from __future__ import annotations

import torch

from torchedge.exir.passes.fusion_matching import fake_call

__all__ = ["NAMESPACE", "rotary_fits", "use_rotary_kernel"]

NAMESPACE = "torchedge_ort"
_LIBRARY = torch.library.Library(NAMESPACE, "DEF")
_LIBRARY.define("rotary_half(Tensor x, Tensor cos, Tensor sin) -> Tensor")
aten = torch.ops.aten
_SAME_HALVES = (aten.cos.default, aten.sin.default, aten._to_copy.default)
_REPLACED = (
    aten.add.Tensor,
    aten.mul.Tensor,
    aten.cat.default,
    aten.neg.default,
    aten.slice_copy.Tensor,
    aten.view_copy.default,
)


def _eager(x, cos, sin):
    half = cos.shape[-1]
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * torch.cat([cos, cos], dim=-1) + rotated * torch.cat([sin, sin], dim=-1)


_LIBRARY.impl("rotary_half", _eager, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::rotary_half", lambda x, cos, sin: torch.empty_like(x), lib=_LIBRARY)


def _sizes(value) -> list[str]:
    return [str(s) for s in value.shape]


def rotary_fits(x, cos, sin) -> bool:
    """``x`` [b, n, s, d] and halves [s, d/2], all float32 (meta values)."""
    if not all(v.dtype == torch.float32 for v in (x, cos, sin)) or x.dim() != 4 or cos.dim() != 2:
        return False
    d = x.shape[-1]
    return isinstance(d, int) and d % 2 == 0 and _sizes(cos) == _sizes(sin) == [str(x.shape[2]), str(d // 2)]


def _is(node, target) -> bool:
    return isinstance(node, torch.fx.Node) and node.target is target


def _equal_halves(node) -> bool:
    """``node``'s last dimension is two equal halves, by construction (see the module docstring)."""
    while isinstance(node, torch.fx.Node):
        rank = node.meta["val"].dim()
        if node.target is aten.cat.default:
            parts, dim = node.args[0], node.args[1] if len(node.args) > 1 else 0
            return len(parts) == 2 and parts[0] is parts[1] and dim % rank == rank - 1
        unsqueezed = node.target is aten.unsqueeze_copy.default and node.args[1] % rank != rank - 1
        if node.target in _SAME_HALVES or unsqueezed:
            node = node.args[0]
        elif node.target in (aten.mul.Tensor, aten.mul.Scalar):
            scalars = [a for a in node.args if not isinstance(a, torch.fx.Node) or a.meta["val"].dim() == 0]
            tensors = [a for a in node.args if a not in scalars]
            if len(scalars) != 1 or len(tensors) != 1:
                return False
            node = tensors[0]
        else:
            return False
    return False


def _rotated(node, x: torch.fx.Node, half: int) -> bool:
    """``node`` is ``cat([-x[..., half:], x[..., :half]], -1)``."""
    if not _is(node, aten.cat.default) or len(node.args[0]) != 2 or node.args[1] not in (-1, 3):
        return False
    negated, low = node.args[0]
    if not _is(negated, aten.neg.default):
        return False
    high = negated.args[0]
    return _is_slice(high, x, half, None) and _is_slice(low, x, 0, half)


def _is_slice(node, x, start: int, end: int | None) -> bool:
    if not _is(node, aten.slice_copy.Tensor) or node.args[0] is not x or len(node.args) < 4:
        return False
    dim, first, last = node.args[1:4]
    step = node.args[4] if len(node.args) > 4 else 1
    full = x.meta["val"].shape[-1]
    last = full if last is None else min(last, full)
    return dim in (-1, 3) and (first or 0) == start and step == 1 and last == (full if end is None else end)


def _match(add: torch.fx.Node):
    """(x, cos, sin) where ``add`` is ``x * cos + rotate_half(x) * sin``; None otherwise."""
    if add.target is not aten.add.Tensor or add.kwargs.get("alpha", 1) != 1 or len(add.args) != 2:
        return None
    for plain, turned in (add.args, reversed(add.args)):
        if not (_is(plain, aten.mul.Tensor) and _is(turned, aten.mul.Tensor)):
            continue
        for x, cos in (plain.args, reversed(plain.args)):
            x_val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
            if not isinstance(x_val, torch.Tensor) or x_val.dim() != 4 or not isinstance(x_val.shape[-1], int):
                continue
            half = x_val.shape[-1] // 2
            for rotated, sin in (turned.args, reversed(turned.args)):
                if _rotated(rotated, x, half) and all(_table(t, x_val) for t in (cos, sin)):
                    return x, cos, sin
    return None


def _table(node, x_val) -> bool:
    """A [1, 1, s, d] table of equal halves for ``x`` [b, n, s, d]."""
    if not isinstance(node, torch.fx.Node) or not _equal_halves(node):
        return False
    return _sizes(node.meta["val"]) == ["1", "1", str(x_val.shape[2]), str(x_val.shape[3])]


def _half(graph: torch.fx.Graph, table: torch.fx.Node, halves: dict) -> torch.fx.Node:
    """``table[0, 0, :, :d/2]`` as [s, d/2], made once per table, right after it."""
    if table not in halves:
        half = table.meta["val"].shape[-1] // 2
        with graph.inserting_before(table.next):
            sliced = graph.call_function(aten.slice_copy.Tensor, (table, 3, 0, half))
            val = table.meta["val"]
            with val.fake_mode:  # (fake slicing would read a symbolic storage offset)
                sliced.meta["val"] = val.new_empty([*val.shape[:-1], half])
            halves[table] = fake_call(graph, aten.view_copy.default, sliced, [-1, half])
    return halves[table]


def use_rotary_kernel(graph_module: torch.fx.GraphModule) -> bool:
    """Replace, in place, each rotary embedding whose tables have equal halves by one
    ``rotary_half`` call; returns whether the graph changed."""
    graph = graph_module.graph
    halves: dict[torch.fx.Node, torch.fx.Node] = {}  # table -> its first half, [s, d/2]
    op = getattr(torch.ops, NAMESPACE).rotary_half.default
    changed = False
    for add in [n for n in graph.nodes if n.op == "call_function"]:
        found = _match(add)
        if found is None or any(user.op == "output" for user in add.users):
            continue  # (the graph signature names its outputs: a graph output keeps its node)
        x, cos, sin = found
        cos_half, sin_half = _half(graph, cos, halves), _half(graph, sin, halves)
        if not rotary_fits(x.meta["val"], cos_half.meta["val"], sin_half.meta["val"]):
            continue
        with graph.inserting_before(add):
            rotary = fake_call(graph, op, x, cos_half, sin_half)
        add.replace_all_uses_with(rotary)
        changed = True
    for node in reversed([n for n in graph.nodes if n.op == "call_function"]):
        if not node.users and (node.target in _REPLACED or node in halves.values()):
            graph.erase_node(node)  # the replaced sums and their parts, read by nothing else
    if changed:
        graph_module.recompile()
    return changed
