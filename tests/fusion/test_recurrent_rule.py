"""The recurrent rule's matcher (`torchedge.fusion.rules_recurrent`) on toy LSTM and GRU steps: no
torch, no runtime. Each guard has a step that differs from a fusable one only where the guard
looks, and must not fuse (or must leave the projection out)."""

from __future__ import annotations

import itertools

import pytest

from torchedge.fusion.pattern import MISSING
from torchedge.fusion.rules_recurrent import RECURRENT_RULES, shorter

RULE = RECURRENT_RULES[0]
_order = itertools.count()


class T:
    """A tensor no node computed (an input)."""

    def __init__(node, shape, dtype="float32"):
        node.shape, node.dtype = shape, dtype


class N(T):
    """A call: its operator, arguments, and the shape and dtype of its result."""

    def __init__(node, op, shape, dtype="float32", /, **args):
        super().__init__(shape, dtype)
        node.op, node.args, node.seq = op, args, next(_order)


class Item(T):
    """Result ``index`` of the call ``node`` (a split's chunk)."""

    def __init__(self, node, index, shape, dtype="float32"):
        super().__init__(shape, dtype)
        self.node, self.index = node, index


class ToyGraph:
    def operator(self, node):
        return node.op if isinstance(node, N) else None

    def argument(self, node, name):
        return node if name == "out" else node.args.get(name, MISSING)

    def producer(self, ref):
        return ref.node if isinstance(ref, Item) else ref if isinstance(ref, N) else None

    def constant(self, ref):
        return MISSING if isinstance(ref, T) else ref

    def copied(self, node):
        return None

    def same(self, a, b):
        return a is b

    def item(self, ref):
        return (ref.node, ref.index) if isinstance(ref, Item) else None

    def order(self, node):
        return node.seq

    def readers(self, node):
        return ()

    def shape(self, ref):
        return ref.shape if isinstance(ref, T) else None

    def dtype(self, ref):
        return ref.dtype if isinstance(ref, T) else None


G = ToyGraph()


def _op(name, shape, dtype="float32", /, **args):
    return N(f"aten::{name}", shape, dtype, **args)


def _split(source, count, width, sizes=None, dim=1, dtype="float32"):
    split = _op("split_with_sizes_copy", None, self=source, split_sizes=sizes or [width] * count, dim=dim)
    return split, [Item(split, i, (2, width), dtype) for i in range(count)]


def lstm(gates_alpha=1, cell_alpha=1, dim=1, sizes=None, roles=(0, 1, 2, 3), cell_dtype="float32", dtype="float32"):
    """One LSTM step (hidden size 4, batch 2) with its hidden projection; the arguments change one thing."""
    x, h, w, bias = T((2, 16), dtype), T((2, 4), dtype), T((4, 16), dtype), T((16,), dtype)
    cell = T((2, 4), cell_dtype) if cell_dtype else 0.5
    projection = _op("addmm", (2, 16), dtype, self=bias, mat1=h, mat2=w, beta=1, alpha=1)
    gates = _op("add", (2, 16), dtype, self=projection, other=x, alpha=gates_alpha)
    split, items = _split(gates, 4, 4, sizes, dim, dtype)
    i, f, o = (_op("sigmoid", (2, 4), dtype, self=items[roles[k]]) for k in (0, 1, 3))
    g = _op("tanh", (2, 4), dtype, self=items[roles[2]])
    new_cell = _op(
        "add",
        (2, 4),
        dtype,
        self=_op("mul", (2, 4), dtype, self=f, other=cell),
        other=_op("mul", (2, 4), dtype, self=i, other=g),
        alpha=cell_alpha,
    )
    root = _op("mul", (2, 4), dtype, self=o, other=_op("tanh", (2, 4), dtype, self=new_cell))
    return root, {"x": x, "h": h, "w": w, "bias": bias, "cell": cell, "projection": projection, "gates": gates}


def gru(alphas=(1, 1, 1, 1, 1), swap_sub=False, one_split=False, roles=(0, 1), other_state=False, beta=1):
    """One GRU step (hidden size 4, batch 2) with its hidden projection; ``alphas``: of the final
    sum, the difference, the candidate's sum, the reset's and the update's sums."""
    h, w, bias = T((2, 4)), T((4, 12)), T((12,))
    projection = _op("addmm", (2, 12), self=bias, mat1=T((2, 4)) if other_state else h, mat2=w, beta=beta, alpha=1)
    hidden_split, hs = _split(projection, 3, 4)
    x = T((2, 12))
    input_split, xs = (hidden_split, hs) if one_split else _split(x, 3, 4)
    reset = _op("sigmoid", (2, 4), self=_op("add", (2, 4), self=hs[roles[0]], other=xs[0], alpha=alphas[3]))
    update = _op("sigmoid", (2, 4), self=_op("add", (2, 4), self=hs[roles[1]], other=xs[1], alpha=alphas[4]))
    gated = _op("mul", (2, 4), self=hs[2], other=reset)
    candidate = _op("tanh", (2, 4), self=_op("add", (2, 4), self=gated, other=xs[2], alpha=alphas[2]))
    first, second = (candidate, h) if swap_sub else (h, candidate)
    difference = _op("sub", (2, 4), self=first, other=second, alpha=alphas[1])
    interpolated = _op("mul", (2, 4), self=difference, other=update)
    root = _op("add", (2, 4), self=interpolated, other=candidate, alpha=alphas[0])
    return root, {"x": x, "h": h, "w": w, "bias": bias, "projection": projection}


def test_an_lstm_step_fuses_with_its_projection():
    root, parts = lstm()
    found = RULE.find(G, root)
    assert found is not None and RULE.operator(found) == "torchedge_fused::lstm_cell"
    assert len(found.group) == 12 and parts["projection"] in found.group
    arguments = RULE.arguments(found)
    expected = {"input_gates": parts["x"], "hidden_gates": parts["bias"], "cell": parts["cell"], "hidden": parts["h"]}
    assert arguments == {**expected, "weight": parts["w"], "step": -1}
    assert found.nodes["cell"] is root.args["other"].args["self"]  # the second result: the new cell


def test_a_gru_step_fuses_with_the_projection_of_its_state():
    root, parts = gru()
    found = RULE.find(G, root)
    assert found is not None and RULE.operator(found) == "torchedge_fused::gru_cell"
    assert len(found.group) == 13 and "cell" not in found.nodes
    expected = {"input_gates": parts["x"], "hidden_gates": parts["bias"], "hidden": parts["h"], "weight": parts["w"]}
    assert RULE.arguments(found) == {**expected, "step": -1}


@pytest.mark.parametrize(
    "change",
    [
        {"gates_alpha": 2},  # the gates' sum scales its second operand
        {"cell_alpha": 2},  # the new cell's sum
        {"dim": 0},  # the split is not along the last dim
        {"sizes": [3, 5, 4, 4]},  # unequal chunks
        {"roles": (2, 1, 0, 3)},  # the input gate reads the candidate's chunk
        {"cell_dtype": "float64"},  # one tensor of another dtype
        {"dtype": "float16"},  # a dtype the fused kernel does not take
        {"cell_dtype": None},  # a Scalar operand: the state is a number
    ],
)
def test_an_lstm_step_the_kernel_does_not_compute_is_not_fused(change):
    assert RULE.find(G, lstm(**change)[0]) is None


@pytest.mark.parametrize(
    "change",
    [
        {"alphas": (2, 1, 1, 1, 1)},  # the final sum
        {"alphas": (1, 2, 1, 1, 1)},  # ``sub(hidden, n, alpha=2)``
        {"alphas": (1, 1, 2, 1, 1)},  # the candidate's sum
        {"alphas": (1, 1, 1, 2, 1)},  # the reset gate's sum
        {"alphas": (1, 1, 1, 1, 2)},  # the update gate's sum
        {"swap_sub": True},  # ``n - hidden``
        {"one_split": True},  # the input and hidden gates are one split
        {"roles": (1, 0)},  # the reset gate reads the update's hidden chunk
    ],
)
def test_a_gru_step_the_kernel_does_not_compute_is_not_fused(change):
    assert RULE.find(G, gru(**change)[0]) is None


@pytest.mark.parametrize("change", [{"other_state": True}, {"beta": 2}])
def test_a_gru_projection_of_another_state_or_scaled_stays_outside(change):
    root, parts = gru(**change)
    found = RULE.find(G, root)
    assert found is not None and parts["projection"] not in found.group
    assert found["hidden_gates"] is parts["projection"] and found["weight"] is None


def test_an_lstm_cell_projecting_its_input_takes_the_later_projection_in():
    root, parts = lstm()
    gates = parts["gates"]
    early = _op("addmm", (2, 16), self=T((16,)), mat1=T((2, 8)), mat2=T((8, 16)), beta=1, alpha=1)
    gates.args["other"] = early
    early.seq = -1  # computed before the hidden projection
    found = RULE.find(G, root)
    assert found is not None and parts["projection"] in found.group and early not in found.group
    assert found["input_gates"] is early and found["hidden"] is parts["h"]


def _sliced(step=1, dim=0, end=None, dims=(0,)):
    """An LSTM step whose input gates are ``squeeze_copy(slice_copy(P, dim, step, end), dims)``."""
    root, parts = lstm()
    projections = T((3, 2, 16))
    piece = _op(
        "slice_copy", (1, 2, 16), self=projections, dim=dim, start=step, end=step + 1 if end is None else end, step=1
    )
    parts["gates"].args["other"] = _op("squeeze_copy", (2, 16), self=piece, dim=list(dims))
    return root, projections, parts["gates"].args["other"]


def test_a_step_slice_of_the_input_projections_is_taken_in_and_a_shorter_match_leaves_it_out():
    root, projections, selected = _sliced()
    found = RULE.find(G, root)
    assert found is not None and RULE.arguments(found)["input_gates"] is projections
    assert RULE.arguments(found)["step"] == 1 and selected in found.group
    short = shorter(found)
    assert short is not None and RULE.arguments(short)["input_gates"] is selected
    assert RULE.arguments(short)["step"] == -1 and selected not in short.group and len(short.group) == 12
    assert RULE.candidates(found) == [found, short]


@pytest.mark.parametrize("change", [{"dim": 1}, {"end": 3}, {"dims": (1,)}, {"step": 3}])
def test_a_slice_that_is_not_one_step_stays_outside(change):
    root, _, selected = _sliced(**change)
    found = RULE.find(G, root)
    assert found is not None and found["input_gates"] is selected and shorter(found) is None
