"""The pattern language (`torchedge.fusion.pattern`) on a toy graph: no torch, no runtime."""

from __future__ import annotations

from torchedge.fusion.pattern import MISSING, Const, Copies, Either, Maybe, Op, Same, Var, match


class Node:
    def __init__(self, op, /, **args):
        self.op, self.args = op, args


class ToyGraph:
    """Nodes are `Node`s; a reference is the argument as given (a `Node` or a Python value)."""

    def operator(self, node):
        return node.op

    def argument(self, node, name):
        return node.args.get(name, MISSING)

    def producer(self, ref):
        return ref if isinstance(ref, Node) and ref.op != "input" else None

    def constant(self, ref):
        return MISSING if isinstance(ref, Node) else ref

    def copied(self, node):
        return node.args["self"] if node.op == "aten::clone" else None

    def same(self, a, b):
        return a is b

    def shape(self, ref):
        return None

    def dtype(self, ref):
        return None


G = ToyGraph()
x, w, b = Node("input"), Node("input"), Node("input")


def test_named_arguments_and_literals():
    node = Node("aten::addmm", self=b, mat1=x, mat2=w, beta=1, alpha=1)
    pattern = Op("aten::addmm", self=Var("bias"), mat1=Var("x"), mat2=Var("w"), beta=1, alpha=Const("alpha"))
    found = match(pattern, G, node)
    assert found is not None and found["bias"] is b and found["x"] is x and found["alpha"] == 1
    assert match(Op("aten::addmm", beta=2), G, node) is None  # a literal that differs
    assert match(Op("aten::addmm", missing=1), G, node) is None  # an argument the node does not have
    assert match(Op("aten::mm"), G, node) is None


def test_optional_node():
    product = Node("aten::bmm", self=x, mat2=w)
    pattern = Maybe(Op("aten::add", self=Op("aten::bmm", name="product"), other=Var("mask")), through="self", name="s")
    root = Op("aten::relu", self=pattern)
    with_mask = match(root, G, Node("aten::relu", self=Node("aten::add", self=product, other=b)))
    without = match(root, G, Node("aten::relu", self=product))
    assert with_mask["mask"] is b and with_mask.nodes["product"] is product
    assert without["mask"] is None and without.nodes["s"] is product


def test_commutative_operands():
    sig = Node("aten::sigmoid", self=x)
    pattern = Op("aten::mul", commutative=True, self=Op("aten::sigmoid", self=Var("x")), other=Var("x"))
    assert match(pattern, G, Node("aten::mul", self=sig, other=x)) is not None
    assert match(pattern, G, Node("aten::mul", self=x, other=sig)) is not None
    plain = Op("aten::mul", self=Op("aten::sigmoid", self=Var("x")), other=Var("x"))
    assert match(plain, G, Node("aten::mul", self=x, other=sig)) is None


def test_same_node_copies_and_bound_twice():
    scores = Node("aten::add", self=x, other=w)
    probs = Node("aten::softmax", self=scores)
    root = Node("aten::where", condition=Node("aten::eq", self=scores), other=Node("aten::clone", self=probs))
    pattern = Op(
        "aten::where",
        other=Copies(Op("aten::softmax", self=Op("aten::add", name="scores"))),
        condition=Op("aten::eq", self=Same("scores")),
    )
    found = match(pattern, G, root)
    assert found is not None and len(found.group) == 5  # the clone is covered too
    other = Node("aten::where", condition=Node("aten::eq", self=Node("aten::add", self=x, other=w)), other=probs)
    assert match(pattern, G, other) is None  # a different add
    twice = Op("aten::add", self=Var("a"), other=Var("a"))
    assert match(twice, G, Node("aten::add", self=x, other=x)) is not None
    assert match(twice, G, Node("aten::add", self=x, other=w)) is None


def test_guard_rejects_in_const_test():
    pattern = Op("aten::mul", self=Var("x"), other=Const("scale", lambda v: isinstance(v, float)))
    assert match(pattern, G, Node("aten::mul", self=x, other=0.5)) is not None
    assert match(pattern, G, Node("aten::mul", self=x, other=True)) is None


def test_alternatives_and_a_bound_pattern():
    product = Either(
        Op("aten::addmm", name="p", self=Var("bias"), mat1=Var("x")), Op("aten::mm", name="p", self=Var("x"))
    )
    root = Either(Op("aten::relu", self=product), Op("aten::gelu", self=product, approximate="none"))
    assert root.operators == ("aten::relu", "aten::gelu")
    mm = Node("aten::mm", self=x)
    found = match(root, G, Node("aten::gelu", self=mm, approximate="none"))
    assert found is not None and found["x"] is x and found["bias"] is None and found.nodes["p"] is mm
    assert found.operator() == "gelu"
    assert match(root, G, Node("aten::gelu", self=mm, approximate="tanh")) is None
    # an alternative that fails leaves nothing bound for the next one
    addmm = Node("aten::addmm", self=b, mat1=x)
    assert match(root, G, Node("aten::relu", self=addmm))["bias"] is b
    silu = Op("aten::mul", commutative=True, self=Var("g", Op("aten::mm")), other=Op("aten::sigmoid", self=Var("g")))
    assert match(silu, G, Node("aten::mul", self=Node("aten::sigmoid", self=mm), other=mm)) is not None
    assert match(silu, G, Node("aten::mul", self=Node("aten::sigmoid", self=x), other=x)) is None  # x is no mm
