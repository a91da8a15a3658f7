"""The XNNPACK interpreter's adapter of `torchedge.fusion`'s rules: a payload's nodes as a `Graph`
the pattern matcher walks (each node named as the ATen operator it computes), and the fused step
a match becomes, run by the fused operator's registered kernel.

A node is its index in the payload; a reference is a `Ref`: a value as the operator reads it
(a fully connected node's input as (rows, in), its filter as the [in, out] matrix ``addmm``
takes), or a literal argument. Only rules whose fused operator has a step builder here
(`FUSED`) are tried: ``linear_act`` (``XNNFullyConnected`` then ``XNNGelu``, level ``exact``),
whose kernel runs the node's own product, bias and gelu on the same values, so the same bits.
A group is fused only where nothing outside it reads what its other nodes write, and its first
nodes carry no clamp of their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.buffer_reuse import value_ids
from torchedge.backends.xnnpack.nodes_linear_conv import fc_matrix, rows_view
from torchedge.fusion.options import FusionOptions
from torchedge.fusion.pattern import MISSING, Match
from torchedge.kernels.optimized.derived_arrays import derived
from torchedge.kernels.registry import get_kernel

__all__ = ["Fusion", "Ref", "PayloadGraph", "plan_fusions"]

_TRANSPOSE_WEIGHTS = 0x1  # XNN_FLAG_TRANSPOSE_WEIGHTS


class Ref(NamedTuple):
    """A value as an operator reads it (``view``: "rows", "matrix" or "" as it is), or a literal."""

    value: int | None
    view: str = ""
    literal: object = None


@dataclass(frozen=True)
class Fusion:
    """A matched group: its nodes, the root that takes their place, and the fused step's builder
    with the rule's arguments."""

    rule: str
    nodes: tuple[int, ...]
    root: int
    build: Callable
    arguments: dict


class PayloadGraph:
    """An XNNPACK graph's nodes as a `torchedge.fusion.pattern.Graph`; ``tensors`` are the
    values' dims, dtypes and quantization (`graph._Tensor`), ``outputs`` the external output ids."""

    def __init__(self, nodes: list, tensors: dict, outputs: set[int]):
        self.nodes, self.tensors = nodes, tensors  # nodes: the graph's `XNode`s
        self._producers: dict[int, int] = {}
        self._readers: dict[int, list] = {}
        for i, xnode in enumerate(nodes):
            if xnode.xnode_union is None:
                continue
            reads, writes = value_ids(xnode.xnode_union)
            self._producers.update((value_id, i) for value_id in writes)
            for value_id in reads:
                self._readers.setdefault(value_id, []).append(i)
        for value_id in outputs:
            self._readers.setdefault(value_id, []).append(None)

    def operator(self, node) -> str | None:
        xnode = self.nodes[node]
        kind = type(xnode.xnode_union).__name__
        if kind == "XNNFullyConnected" and _no_clamp(xnode):
            return "aten::mm" if xnode.xnode_union.bias_id == s.INVALID_VALUE_ID else "aten::addmm"
        return "aten::gelu" if kind == "XNNGelu" else None

    def argument(self, node, name: str):
        n = self.nodes[node].xnode_union
        if type(n).__name__ == "XNNGelu":
            return {"self": Ref(n.input_id), "approximate": Ref(None, literal="none")}.get(name, MISSING)
        arguments = {"mat1": Ref(n.input1_id, "rows"), "mat2": Ref(n.filter_id, "matrix"), "self": Ref(n.bias_id)}
        if n.bias_id == s.INVALID_VALUE_ID:
            arguments["self"] = arguments.pop("mat1")
        else:
            arguments.update(beta=Ref(None, literal=1), alpha=Ref(None, literal=1))
        return arguments.get(name, MISSING)

    def producer(self, ref: Ref):
        return None if ref.view else self._producers.get(ref.value)

    def constant(self, ref: Ref):
        return MISSING if ref.value is not None else ref.literal

    def copied(self, node):
        return None

    def same(self, a: Ref, b: Ref) -> bool:
        return a == b

    def item(self, ref):
        return None

    def order(self, node) -> int:
        return node

    def readers(self, node) -> tuple:
        return tuple(self._readers.get(getattr(self.nodes[node].xnode_union, "output_id", None), ()))

    def shape(self, ref: Ref) -> tuple | None:
        tensor = self.tensors.get(ref.value)
        if tensor is None:
            return None
        dims = tensor.dims
        if ref.view == "rows" and dims:
            return (math.prod(dims[:-1]), dims[-1])
        if ref.view == "matrix" and len(dims) == 2:
            return dims if self._transposed(ref.value) else dims[::-1]
        return dims

    def dtype(self, ref: Ref) -> str | None:
        tensor = self.tensors.get(ref.value)
        return None if tensor is None or tensor.quant is not None else tensor.dtype.name

    def _transposed(self, filter_id: int) -> bool:
        return any(
            getattr(n.xnode_union, "filter_id", None) == filter_id and n.xnode_union.flags & _TRANSPOSE_WEIGHTS
            for n in self.nodes
        )


def _no_clamp(xnode) -> bool:
    bounds = xnode.output_min_max
    return bounds is None or (bounds.output_min == -np.inf and bounds.output_max == np.inf)


def _linear_act(ctx, nodes: list, arguments: dict, root) -> Callable:
    """The step of ``torchedge_fused::linear_act``: the fully connected node's product, bias and
    the activation in place, written as the root's output."""
    (product,) = (n for n in nodes if isinstance(n, s.XNNFullyConnected))
    x, weight, bias = ctx.value(product.input1_id), ctx.value(product.filter_id), ctx.optional(product.bias_id)
    transposed = bool(product.flags & _TRANSPOSE_WEIGHTS)
    matrix = derived(fc_matrix, (weight,), transposed, weight.dtype)
    n_in, n_out = matrix.shape
    ctx.check(x.size % n_in == 0, f"input {list(x.shape)} does not split into rows of {n_in}")
    out = ctx.output(root.output_id).reshape(-1, n_out)
    kernel, activation = get_kernel("torchedge_fused::linear_act.out").fn, arguments["activation"]
    rows = rows_view(x, n_in)
    if rows is None:  # not a view of rows: reshaped (a copy) each call
        return lambda: kernel(x.reshape(-1, n_in), matrix, bias, activation, out)
    return lambda: kernel(rows, matrix, bias, activation, out)


FUSED = {"torchedge_fused::linear_act": _linear_act}


def plan_fusions(graph: PayloadGraph, options: FusionOptions | None = None) -> dict[int, Fusion]:
    """The groups of ``graph``'s nodes to run fused, by root node, for the rules ``options``
    enables (default: `FusionOptions()`) whose fused operator has a builder here."""
    fusions: dict[int, Fusion] = {}
    taken: set[int] = set()
    for rule in (options or FusionOptions()).rules():
        if rule.pattern is None or rule.arguments is None or rule.fused not in FUSED or "load" not in rule.stages:
            continue
        for root in reversed(range(len(graph.nodes))):
            if root in taken or graph.operator(root) not in rule.anchors:
                continue
            found = rule.find(graph, root)
            if found is None or not _closed(graph, found) or not rule.guard(found) or not rule.pays(found):
                continue
            nodes = tuple(sorted(found.group))
            if taken.intersection(nodes):
                continue
            taken.update(nodes)
            arguments = rule.arguments
            fusions[root] = Fusion(rule.name, nodes, root, FUSED[rule.fused], arguments(found))
    return fusions


def _closed(graph: PayloadGraph, found: Match) -> bool:
    """Whether only the group reads what its nodes other than the root write."""
    group = set(found.group)
    return all(set(graph.readers(n)) <= group for n in group if n != found.root)
