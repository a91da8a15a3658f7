"""Compute only the rows a program reads: a ``select`` or ``slice`` moves toward the inputs.

A classifier that reads one token (ViT's and BERT's ``hidden[:, 0]``) or a language model that
keeps the last position's logits exports its whole last block computed for every row, then a
``select_copy`` of one. The operators in between treat the rows of that dim independently
(elementwise operators, a linear layer's rows, a layer norm or softmax over other dims, the
query rows of attention's products, reshapes and permutes that keep the dim whole), so the
select can go before them: ``select(f(x), d, i) == select(f(x[i:i+1 along d']), d, 0)``.

`narrow_rows` rewrites ``cut(f(x...))``, where every user of ``f``'s result is a cut of the
same rows, into ``f`` on the cut rows of each input that has them (an input broadcast along
the dim is left whole), and repeats on the new cuts until an operator has no rule or feeds
another user too (there the cut stays: ViT's keys and values still read every row). The
result is the same computation on fewer rows: a ViT's last block runs for one token of 197.

Only static shapes are narrowed, and only operators whose rows are independent by their
definition (`_RULES`, and every ATen operator tagged pointwise that draws no random numbers).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import torch

from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.fusion_matching import fake_result, is_call, is_static, meta_val

__all__ = ["NarrowRowsPass", "narrow_rows"]

_aten = torch.ops.aten
_SELECT, _SLICE, _VIEW = _aten.select_copy.int, _aten.slice_copy.Tensor, _aten.view_copy.default
_DYNAMIC_DEQUANTIZE = "quantized_decomposed.dequantize_per_tensor.tensor"  # by name: quantization may not be loaded

# A rule maps (node, dim, start, stop, cut) to the node's new args computing only rows
# [start, stop) of output dim ``dim``, or None where it cannot; ``cut(arg, arg_dim)`` gives the
# node feeding those rows of an input.
Rule = Callable[[torch.fx.Node, int, int, int, Callable], tuple | None]


def _shape(node) -> tuple:
    return tuple(meta_val(node).shape)


def _rows(cut: torch.fx.Node) -> tuple[int, int, int] | None:
    """(dim, start, stop) of the rows a select or unit-step slice reads from a static source."""
    source = cut.args[0]
    if not (is_static(source) and is_static(cut)):
        return None
    shape = _shape(source)
    if not shape:
        return None
    args: list = list(cut.args) + [None] * (5 - len(cut.args))
    if not all(a is None or isinstance(a, int) for a in args[1:]) or (args[4] or 1) != 1:
        return None
    dim: int = (args[1] or 0) % len(shape)
    size: int = shape[dim]
    start: int
    stop: int
    if cut.target is _SELECT:
        start = args[2] % size if size else 0
        stop = start + 1
    else:
        start, stop, _ = slice(args[2], args[3]).indices(size)
    return (dim, start, stop) if 0 <= start < stop <= size and stop - start < size else None


def _cut_broadcast(arg, rank: int, dim: int, cut):
    """``arg`` as broadcast against a result of ``rank`` dims: cut along its dim matching
    ``dim``, left whole where it lacks that dim or has it as 1."""
    shape = _shape(arg)
    arg_dim = dim - (rank - len(shape))
    return arg if arg_dim < 0 or shape[arg_dim] == 1 else cut(arg, arg_dim)


def _pointwise(node, dim, start, stop, cut):
    """Elementwise with broadcasting: every input that has the dim (not as 1) is cut too."""
    rank = len(_shape(node))
    return tuple(
        _cut_broadcast(a, rank, dim, cut)
        if isinstance(a, torch.fx.Node) and isinstance(meta_val(a), torch.Tensor)
        else a
        for a in node.args
    )


def _first_input(node, dim, start, stop, cut):
    """Operators shaped like their first input (``full_like``, ``_to_copy``)."""
    return (cut(node.args[0], dim), *node.args[1:])


def _normalised_over(first_kept: Callable[[torch.fx.Node], int]) -> Rule:
    """Operators that mix only dims from ``first_kept(node)`` on (softmax, layer norm)."""

    def rule(node, dim, start, stop, cut):
        return (cut(node.args[0], dim), *node.args[1:]) if dim < first_kept(node) else None

    return rule


def _softmax_dim(node) -> int:
    return node.args[1] % len(_shape(node))


def _reduction(node, dim, start, stop, cut):
    """A reduction over other dims; with keepdim False the output dims skip the reduced ones."""
    rank = len(_shape(node.args[0]))
    reduced = node.args[1] if len(node.args) > 1 else None
    if reduced is None or (not isinstance(reduced, int) and len(reduced) == 0):  # none: every dim
        return None
    reduced = {d % rank for d in ([reduced] if isinstance(reduced, int) else reduced)}
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    kept = list(range(rank)) if keepdim else [d for d in range(rank) if d not in reduced]
    source_dim = kept[dim]
    return None if source_dim in reduced else (cut(node.args[0], source_dim), *node.args[1:])


def _view(node, dim, start, stop, cut):
    """A reshape keeping the dim whole: the same size, and the same number of elements before it."""
    source, shape = _shape(node.args[0]), _shape(node)
    before = math.prod(shape[:dim])
    for source_dim, size in enumerate(source):
        if size == shape[dim] and math.prod(source[:source_dim]) == before:
            new_shape = list(shape)
            new_shape[dim] = stop - start
            return (cut(node.args[0], source_dim), new_shape)
    return None


def _permute(node, dim, start, stop, cut):
    perm = node.args[1]
    return (cut(node.args[0], perm[dim] % len(perm)), perm)


def _expand(node, dim, start, stop, cut):
    sizes = list(node.args[1])
    sizes[dim] = stop - start
    return (_cut_broadcast(node.args[0], len(sizes), dim, cut), sizes)


def _dynamically_quantized(node) -> bool:
    """Whether ``node`` is (a view of) an activation dequantized with parameters computed at run
    time from the whole tensor (dynamic quantization)."""
    while is_call(node, _VIEW):
        node = node.args[0]
    return isinstance(node, torch.fx.Node) and str(node.target) == _DYNAMIC_DEQUANTIZE


def _matrix_rows(first: int) -> Rule:
    """``mm``/``addmm``/``bmm``: output rows are the rows of the left operand (at ``first``);
    ``bmm``'s batch dim cuts both operands. A dynamically quantized left operand keeps its rows:
    a backend quantizes the rows it is given (XNNPACK's ``qdint8``), so cut, the product would
    part from its quantization and leave the delegate."""

    def rule(node, dim, start, stop, cut):
        rank = len(_shape(node))
        args = list(node.args)
        if _dynamically_quantized(args[first]):
            return None
        if dim == rank - 2:
            args[first] = cut(args[first], rank - 2)
        elif dim < rank - 2:
            args[first], args[first + 1] = cut(args[first], dim), cut(args[first + 1], dim)
        else:
            return None
        if first == 1:  # addmm's bias broadcasts against the product
            args[0] = _cut_broadcast(args[0], 2, dim, cut)
        return tuple(args)

    return rule


def _select_through(node, dim, start, stop, cut):
    """The rows of a select's output along another dim."""
    selected = node.args[1] % len(_shape(node.args[0]))
    return (cut(node.args[0], dim if dim < selected else dim + 1), *node.args[1:])


_RULES: dict = {
    _aten.full_like.default: _first_input,
    _aten._to_copy.default: _first_input,
    _aten._softmax.default: _normalised_over(_softmax_dim),
    _aten._log_softmax.default: _normalised_over(_softmax_dim),
    _aten.any.dim: _reduction,
    _aten.amax.default: _reduction,
    _aten.amin.default: _reduction,
    _aten.sum.dim_IntList: _reduction,
    _aten.mean.dim: _reduction,
    _VIEW: _view,
    _aten.permute_copy.default: _permute,
    _aten.expand_copy.default: _expand,
    _aten.mm.default: _matrix_rows(0),
    _aten.bmm.default: _matrix_rows(0),
    _aten.addmm.default: _matrix_rows(1),
    _SELECT: _select_through,
}

# Layer norm (one of three results used): the statistics are per row, over the last dims.
_LAYER_NORM = _normalised_over(lambda node: len(_shape(node.args[0])) - len(node.args[1]))


def _rule(node: torch.fx.Node) -> Rule | None:
    schema = getattr(node.target, "_schema", None)
    if schema is not None and schema.is_mutable:  # a write into an input: its rows are all its own
        return None
    rule = _RULES.get(node.target)
    if rule is not None:
        return rule
    tags = getattr(node.target, "tags", ())
    if torch.Tag.pointwise in tags and torch.Tag.nondeterministic_seeded not in tags:
        return _pointwise
    return None


def _push(graph: torch.fx.Graph, cut: torch.fx.Node) -> list[torch.fx.Node] | None:
    """Move ``cut`` before its source when the source has a rule and only cuts of the same rows
    read it; returns the cuts made on the source's inputs, None where nothing moved."""
    rows = _rows(cut)
    source = cut.args[0]
    if rows is None or not isinstance(source, torch.fx.Node) or source.op != "call_function":
        return None
    if any(not is_call(user, _SELECT, _SLICE) or _rows(user) != rows for user in source.users):
        return None
    # a getitem: layer norm's normalised result, its statistics unused
    node = source.args[0] if source.target is operator.getitem else source
    if not isinstance(node, torch.fx.Node):
        return None
    rule: Rule | None = _rule(node)
    if node is not source:
        layer_norm = is_call(node, _aten.native_layer_norm.default) and source.args[1] == 0
        rule = _LAYER_NORM if layer_norm and len(node.users) == 1 else None
    tensor_kwargs = any(isinstance(v, torch.fx.Node) for v in node.kwargs.values())
    if rule is None or tensor_kwargs or not all(is_static(a) for a in node.all_input_nodes):
        return None
    dim, start, stop = rows
    made: list[torch.fx.Node] = []

    def cut_input(arg: torch.fx.Node, arg_dim: int) -> torch.fx.Node:
        with graph.inserting_before(node):
            new = graph.call_function(_SLICE, (arg, arg_dim, start, stop))
        new.meta["val"] = fake_result(_SLICE, new.args, {})
        inherit_debug_info(new, node)
        made.append(new)
        return new

    args = rule(node, dim, start, stop, cut_input)
    if args is None:
        for new in made:
            graph.erase_node(new)
        return None
    node.args = args
    node.meta["val"] = fake_result(node.target, args, node.kwargs)
    if source is not node:
        source.meta["val"] = node.meta["val"][0]
    for user in list(source.users):  # each cut now reads every row: gone, or a reshape (a select's)
        if _shape(user) == _shape(source) and all(u.op != "output" for u in user.users):
            user.replace_all_uses_with(source)
            graph.erase_node(user)
        else:
            user.target, user.args = _VIEW, (source, list(_shape(user)))
    return made


def narrow_rows(graph: torch.fx.Graph) -> bool:
    """Move every select and slice as far toward the inputs as the rules allow."""
    work = [node for node in graph.nodes if is_call(node, _SELECT, _SLICE)]
    changed = False
    while work:
        cut = work.pop()
        if cut._erased or not is_call(cut, _SELECT, _SLICE):
            continue
        made = _push(graph, cut)
        if made is not None:
            changed = True
            work.extend(made)
    return changed


class NarrowRowsPass(PassBase):
    """`narrow_rows` on a graph (see the module docstring)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = narrow_rows(graph_module.graph)
        if modified:
            graph_module.graph.lint()
        return PassResult(graph_module, modified)
