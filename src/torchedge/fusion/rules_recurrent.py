"""The recurrent rule: an unrolled ``nn.LSTM`` / ``nn.GRU`` timestep as
``torchedge_fused::lstm_cell`` / ``gru_cell``.

``torch.export`` writes each LSTM timestep as the hidden projection (``addmm``), its ``add`` to
the step's input gates, a split in four, three sigmoids, two tanhs and the products and sums of
the new cell and hidden state; each GRU timestep as the splits of its input and hidden gates in
three, two sigmoid gates, the ``tanh`` candidate and the interpolation ``(hidden - n) * z + n``.
A cell reads each chunk of a split by its position and writes two results (LSTM), which a pattern
cannot say: `recurrent_cell` is the rule's matcher, walking back from the new hidden state (an
LSTM's product, a GRU's sum). Every ``add`` and ``sub`` has ``alpha`` 1 and tensor operands, a
split cuts the last dim in equal chunks, a projection is ``addmm`` with ``beta`` and ``alpha`` 1
and a 1-d bias, and every tensor read or written is of one float dtype: the fused kernels run
the same operations in the same order, so the results have the same bits.

A first step whose hidden projection constant folding already computed fuses without the
projection (LSTM) or stays as written (GRU: its three gates are separate constants). A GRU's
projection is taken in only when it projects the state the step carries on. A step's slice of
its layer's input projections (one GEMM over all steps), ``squeeze_copy(slice_copy(P, 0, t,
t + 1), [0])``, is taken in (the kernel reads ``P[t]``) where the adapter can replace it with
the cell: ahead of time, and at load where the slice runs right before the cell (one timestep).
Elsewhere at load the slices ran long before the cells, and the rule's `shorter` match leaves
them out (step index -1: the input gates are the step's own).
"""

from __future__ import annotations

import math

from torchedge.fusion.pattern import MISSING, Graph, Match
from torchedge.fusion.rule import FLOATS, Rule

__all__ = ["RECURRENT_RULES", "recurrent_cell", "shorter"]

_SPLITS = ("aten::split_with_sizes_copy", "aten::split_copy")
_SIZES = {"aten::split_with_sizes_copy": "split_sizes", "aten::split_copy": "split_size"}
_SIGMOID, _TANH, _MUL, _ADD, _SUB = (f"aten::{op}" for op in ("sigmoid", "tanh", "mul", "add", "sub"))
_LSTM, _GRU = "torchedge_fused::lstm_cell", "torchedge_fused::gru_cell"


def _made_by(graph: Graph, node, name: str, operators) -> object | None:
    """The node calling one of ``operators`` (one name or a tuple) that computed ``node``'s
    argument ``name``."""
    ref = MISSING if node is None else graph.argument(node, name)
    producer = None if ref is MISSING else _source(graph, ref)
    if producer is None or graph.operator(producer) not in ((operators,) if isinstance(operators, str) else operators):
        return None
    return producer


def _source(graph: Graph, ref):
    """The node that computed ``ref``: its producer, or the call one of whose results it is."""
    producer = graph.producer(ref)
    item = graph.item(ref) if producer is None else None
    return producer if item is None else item[0]


def _through(graph: Graph, ref) -> tuple:
    """(the value ``ref`` reads through plain copies, the copies)."""
    copies: list = []
    while (node := graph.producer(ref)) is not None and node not in copies:
        source = graph.copied(node)
        if source is None:
            break
        copies.append(node)
        ref = source
    return ref, copies


def _operands(graph: Graph, node, first, second) -> tuple | None:
    """The producers of a two-tensor call's operands, calling ``first`` and ``second`` (one name
    or a tuple) in either order (a ``sub`` in its own order); with ``second`` None, the producer
    of the ``first`` operand and the reference to the other operand. An ``add`` or ``sub`` must
    have ``alpha`` 1."""
    if node is None:
        return None
    refs = [graph.argument(node, name) for name in ("self", "other")]
    if any(ref is MISSING or graph.dtype(ref) is None for ref in refs):
        return None  # (a Scalar overload)
    operator = graph.operator(node)
    if operator in (_ADD, _SUB) and graph.constant(graph.argument(node, "alpha")) != 1:
        return None
    for a, b in ((0, 1),) if operator == _SUB else ((0, 1), (1, 0)):
        p = _made_by(graph, node, ("self", "other")[a], first)
        if p is None:
            continue
        if second is None:
            return p, refs[b]
        q = _made_by(graph, node, ("self", "other")[b], second)
        if q is not None:
            return p, q
    return None


def _chunked(graph: Graph, split, count: int) -> bool:
    """Whether ``split`` cuts its input's last dim into ``count`` equal chunks."""
    shape = graph.shape(graph.argument(split, "self")) or ()
    sizes = graph.constant(graph.argument(split, _SIZES[str(graph.operator(split))]))
    dim = graph.constant(graph.argument(split, "dim"))
    width = shape[-1] if shape else 0
    sizes = [sizes] * count if isinstance(sizes, int) else list(sizes)  # split_copy's one size, or each chunk's
    return width % count == 0 and sizes == [width // count] * count and dim in (-1, len(shape) - 1)


def _chunk(graph: Graph, node, split, index: int):
    """The reference by which ``node`` reads chunk ``index`` of ``split``'s results, None if it does not."""
    refs = (graph.argument(node, name) for name in ("self", "other"))
    return next((ref for ref in refs if ref is not MISSING and graph.item(ref) == (split, index)), None)


def _projection(graph: Graph, node, name: str) -> tuple | None:
    """``(addmm, its copies, the hidden state)`` when ``node``'s argument ``name`` is
    ``addmm(bias, hidden, weight)`` (``beta`` and ``alpha`` 1, a 1-d bias), maybe reshaped by
    plain copies keeping its rows of ``width`` (``hidden`` itself maybe flattened by copies)."""
    ref = graph.argument(node, name)
    projected, copies = _through(graph, ref)
    product = graph.producer(projected)
    if product is None or graph.operator(product) != "aten::addmm":
        return None
    beta, alpha = (graph.constant(graph.argument(product, n)) for n in ("beta", "alpha"))
    if beta != 1 or alpha != 1 or len(graph.shape(graph.argument(product, "self")) or ()) != 1:
        return None
    hidden, flattened = _through(graph, graph.argument(product, "mat1"))
    rows, weight, gates = (graph.shape(r) for r in (hidden, graph.argument(product, "mat2"), ref))
    if rows is None or weight is None or gates is None or gates[-1:] != weight[-1:]:
        return None
    return (product, [*copies, *flattened], hidden) if math.prod(gates) == math.prod(rows[:-1]) * weight[-1] else None


def _selected(graph: Graph, ref) -> tuple | None:
    """``(projections, step, the two nodes)`` when ``ref`` is ``projections[step]`` as exported,
    ``squeeze_copy(slice_copy(projections, 0, step, step + 1), [0])``."""
    squeeze = graph.producer(ref)
    if squeeze is None or graph.operator(squeeze) != "aten::squeeze_copy":
        return None
    dims = graph.constant(graph.argument(squeeze, "dim"))
    piece = _made_by(graph, squeeze, "self", "aten::slice_copy")
    if not isinstance(dims, (list, tuple)) or list(dims) != [0] or piece is None:
        return None
    source = graph.argument(piece, "self")
    dim, start, end, step = (graph.constant(graph.argument(piece, n)) for n in ("dim", "start", "end", "step"))
    length = (graph.shape(source) or (None,))[0]
    start = 0 if start is None else start
    if dim != 0 or step != 1 or not isinstance(start, int) or end != start + 1 or not isinstance(length, int):
        return None
    return (source, start, [squeeze, piece]) if 0 <= start < length else None


def _lstm(graph: Graph, root) -> Match | None:
    """``σ(o) * tanh(σ(f) * cell + σ(i) * tanh(g))`` back to the split of ``hidden gates + input gates``."""
    outer = _operands(graph, root, _SIGMOID, _TANH)
    if outer is None:
        return None
    output_gate, cell_tanh = outer
    new_cell = _made_by(graph, cell_tanh, "self", _ADD)
    products = _operands(graph, new_cell, _MUL, _MUL)
    if products is None:
        return None
    for forget_mul, input_mul in (products, products[::-1]):
        candidate, forget = _operands(graph, input_mul, _SIGMOID, _TANH), _operands(graph, forget_mul, _SIGMOID, None)
        if candidate is not None and forget is not None:
            break
    else:
        return None
    split = _made_by(graph, output_gate, "self", _SPLITS)
    activations = (candidate[0], forget[0], candidate[1], output_gate)  # i, f, g, o
    chunks = [None if split is None else _chunk(graph, a, split, i) for i, a in enumerate(activations)]
    if split is None or not _chunked(graph, split, 4) or None in chunks:
        return None
    gates = _made_by(graph, split, "self", _ADD)
    if gates is None or graph.constant(graph.argument(gates, "alpha")) != 1:
        return None
    # with both sums projections (an ``nn.LSTMCell`` projects its input each step), the later one,
    # next to the cell: the other ran before the group (which one is the state's does not matter)
    projections = [p for p in (_projection(graph, gates, n) for n in ("self", "other")) if p is not None]
    projection = max(projections, key=lambda p: graph.order(p[0]), default=None)
    side = "self"
    if projection is not None and _source(graph, _through(graph, graph.argument(gates, "self"))[0]) != projection[0]:
        side = "other"
    refs = {"input_gates": graph.argument(gates, "other" if side == "self" else "self")}
    refs.update(hidden_gates=graph.argument(gates, side), cell=forget[1])
    group = [root, *outer, new_cell, *products, *candidate, forget[0], split, gates]
    if projection is not None:
        product, copies, refs["hidden"] = projection
        group += [product, *copies]
        refs.update(hidden_gates=graph.argument(product, "self"), weight=graph.argument(product, "mat2"))
    return _found(graph, Match(graph, root=root, refs=refs, nodes={"cell": new_cell}, group=group), chunks)


def _gru(graph: Graph, root) -> Match | None:
    """``(hidden - n) * z + n`` with ``n = tanh(x_n + h_n * r)``, ``r`` and ``z`` the sigmoids of
    ``h_r + x_r`` and ``h_z + x_z``, back to the splits of the hidden and the input gates."""
    ends = _operands(graph, root, _MUL, _TANH)
    parts = None if ends is None else _operands(graph, ends[0], _SUB, _SIGMOID)
    if ends is None or parts is None:
        return None
    (interpolated, candidate), (difference, update) = ends, parts
    alpha = graph.constant(graph.argument(difference, "alpha"))
    if alpha != 1 or graph.producer(graph.argument(difference, "other")) != candidate:
        return None
    candidate_add = _made_by(graph, candidate, "self", _ADD)
    gated_and_x = _operands(graph, candidate_add, _MUL, None)
    gated = None if gated_and_x is None else _operands(graph, gated_and_x[0], _SPLITS, _SIGMOID)
    if gated_and_x is None or gated is None:
        return None
    hidden_split, reset = gated
    reset_add, update_add = _made_by(graph, reset, "self", _ADD), _made_by(graph, update, "self", _ADD)
    resets, updates = _operands(graph, reset_add, _SPLITS, _SPLITS), _operands(graph, update_add, _SPLITS, _SPLITS)
    if resets is None or updates is None or hidden_split not in resets:
        return None
    input_split = resets[1] if resets[0] == hidden_split else resets[0]
    if input_split == hidden_split or set(updates) != {hidden_split, input_split}:
        return None
    if not _chunked(graph, hidden_split, 3) or not _chunked(graph, input_split, 3):
        return None
    roles = [(reset_add, hidden_split, 0), (reset_add, input_split, 0), (update_add, hidden_split, 1)]
    roles += [(update_add, input_split, 1), (gated_and_x[0], hidden_split, 2), (candidate_add, input_split, 2)]
    chunks = [_chunk(graph, *role) for role in roles]
    if None in chunks:
        return None
    hidden = graph.argument(difference, "self")
    refs = {"input_gates": graph.argument(input_split, "self"), "hidden_gates": graph.argument(hidden_split, "self")}
    refs["hidden"] = hidden
    group = [root, interpolated, candidate, difference, update, candidate_add, gated_and_x[0], reset]
    group += [hidden_split, input_split, reset_add, update_add]
    projection = _projection(graph, hidden_split, "self")
    if projection is not None and graph.same(projection[2], hidden):  # the projected state is the one carried on
        product, copies, _ = projection
        group += [product, *copies]
        refs.update(hidden_gates=graph.argument(product, "self"), weight=graph.argument(product, "mat2"))
    return _found(graph, Match(graph, root=root, refs=refs, group=group), chunks)


def _found(graph: Graph, found: Match, chunks: list) -> Match | None:
    """``found``, taking in the step's slice of its layer's input projections where the input
    gates are one (the `shorter` match leaves it out), when every tensor the group reads or writes
    is of one float dtype."""
    names = ("self", "other", "mat1", "mat2", "out")  # (a split's results: its chunks)
    read = [graph.argument(n, a) for n in found.group for a in names if a != "out" or graph.operator(n) not in _SPLITS]
    dtypes = {graph.dtype(ref) for ref in [*found.refs.values(), *chunks, *read] if ref is not MISSING}
    if len(dtypes) != 1 or not dtypes <= set(FLOATS):
        return None
    selected = _selected(graph, found.refs["input_gates"])
    if selected is not None:
        found.refs["step_input"] = found.refs["input_gates"]
        found.refs["input_gates"], found.constants["step"], slices = selected
        found.nodes.update(zip(("squeeze", "slice"), slices))
        found.group += slices
    return found


def shorter(found: Match) -> Match | None:
    """``found`` without the step's slice of the input projections (at load the slice ran long
    before the cell), None when it has none."""
    if "step" not in found.constants:
        return None
    refs = {n: r for n, r in found.refs.items() if n != "step_input"} | {"input_gates": found.refs["step_input"]}
    nodes = {n: node for n, node in found.nodes.items() if n not in ("squeeze", "slice")}
    group = [node for node in found.group if node not in (found.nodes["squeeze"], found.nodes["slice"])]
    return Match(found.graph, root=found.root, refs=refs, nodes=nodes, group=group)


def recurrent_cell(graph: Graph, node) -> Match | None:
    """The LSTM step whose new hidden state the product ``node`` computes, or the GRU step whose sum it is."""
    return _lstm(graph, node) if graph.operator(node) == _MUL else _gru(graph, node)


def _arguments(found: Match) -> dict:
    tensors = ("input_gates", "hidden_gates", "cell", "hidden", "weight")
    arguments = {n: found[n] for n in tensors if n != "cell" or "cell" in found.nodes}
    return arguments | {"step": found.constants.get("step", -1)}


def _fused(found: Match) -> str:
    return _LSTM if "cell" in found.nodes else _GRU


RECURRENT_RULES = (
    Rule(
        "recurrent",
        "exact",
        """An unrolled LSTM / GRU timestep as ``torchedge_fused::lstm_cell`` / ``gru_cell``: the
        same operations in the same order (the same bits).""",
        pick=_fused,
        arguments=_arguments,
        results=("cell",),
        label=lambda found: f"{_fused(found)}.out (fused at load)",
        matcher=recurrent_cell,
        shorter=shorter,
        roots=(_MUL, _ADD),
        reads_first=("input_gates", "hidden_gates", "cell", "hidden", "weight"),
    ),
)
