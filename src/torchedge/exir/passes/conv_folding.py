"""Fold what surrounds a convolution into the convolution itself, in plain core ATen.

* **Batch norm after it.** ``batch_norm(conv(x, W, b))`` with a constant weight and bias and
  constant batch-norm parameters becomes ``conv(x, W * s, (b - mean) * s + beta)`` with
  ``s = gamma / sqrt(var + eps)`` per output channel. The new weight and bias are constant
  expressions: constant folding, which runs next, computes them once at compile time, so the
  program runs one convolution and stores no batch-norm parameters. Only non-transposed
  float32/float64 convolutions whose one user is the batch norm fold.
* **Zero padding before it.** ``conv(constant_pad_nd(x, pads, 0))`` with as many zeros before
  as after each spatial dim becomes ``conv(x)`` with that much more padding (TensorFlow-style
  "same" padding pads explicitly, often by nothing at all). Uneven padding stays.

ExecuTorch runs the result as well; `FuseKernelsPass` folds the uneven cases into its own operator
(both with the one pattern and arithmetic of `torchedge.fusion.rules_convolution`). This is the
one batch-norm fold of the compiler: the fused convolution takes none.
"""

from __future__ import annotations

import operator

import torch

from torchedge.exir.passes.debug_handles import inherit_debug_info
from torchedge.exir.passes.fusion_matching import FxGraph, fake_call
from torchedge.fusion.pattern import match
from torchedge.fusion.rules_convolution import PADDED_CONVOLUTION, padded_sides

__all__ = ["fold_into_convolutions"]

aten = torch.ops.aten
_FLOATS = (torch.float32, torch.float64)


def fold_into_convolutions(graph_module: torch.fx.GraphModule, constant_names: set[str]) -> bool:
    """Fold every foldable batch norm and padding; returns whether anything was folded.
    ``constant_names``: the placeholders holding weights (parameters, buffers, lifted constants)."""
    graph = graph_module.graph
    folded = False
    for node in list(graph.nodes):
        if node.target is aten._native_batch_norm_legit_no_training.default:
            folded |= _fold_batch_norm(graph, node, constant_names)
        elif node.target is aten.convolution.default:
            folded |= _fold_padding(node)
    if folded:
        graph.eliminate_dead_code()
    return folded


def _fold_batch_norm(graph: torch.fx.Graph, norm: torch.fx.Node, constant_names: set[str]) -> bool:
    conv, gamma, beta, mean, var, _momentum, eps = norm.args[:7]
    result = _first_output(norm)
    if result is None or not _foldable_conv(conv, constant_names):
        return False
    dtype = conv.meta["val"].dtype
    if not all(t is None or _is_constant(t, constant_names, dtype) for t in (gamma, beta, mean, var)):
        return False
    weight, bias = conv.args[1], conv.args[2]

    def call(target, *args):
        node = fake_call(graph, target, *args)
        inherit_debug_info(node, norm)
        return node

    with graph.inserting_before(conv):
        scale = call(aten.rsqrt.default, call(aten.add.Scalar, var, eps))
        if gamma is not None:
            scale = call(aten.mul.Tensor, scale, gamma)
        column = call(aten.view_copy.default, scale, [-1] + [1] * (weight.meta["val"].dim() - 1))
        new_weight = call(aten.mul.Tensor, weight, column)
        shift = call(aten.mul.Tensor, mean, scale)  # the bias is (b - mean) * s + beta
        new_bias = (
            call(aten.neg.default, shift)
            if bias is None
            else call(aten.sub.Tensor, call(aten.mul.Tensor, bias, scale), shift)
        )
        if beta is not None:
            new_bias = call(aten.add.Tensor, new_bias, beta)
    conv.args = (conv.args[0], new_weight, new_bias, *conv.args[3:])
    result.replace_all_uses_with(conv)
    return True


def _first_output(norm: torch.fx.Node) -> torch.fx.Node | None:
    """The ``getitem(norm, 0)`` node, when it is the batch norm's only use."""
    users = list(norm.users)
    if len(users) == 1 and users[0].target is operator.getitem and users[0].args[1] == 0:
        return users[0]
    return None


def _foldable_conv(conv, constant_names: set[str]) -> bool:
    if not (isinstance(conv, torch.fx.Node) and conv.target is aten.convolution.default and len(conv.users) == 1):
        return False
    _, weight, bias, _, _, _, transposed, *_ = conv.args
    dtype = conv.meta["val"].dtype
    return (
        not transposed
        and not conv.kwargs
        and dtype in _FLOATS
        and _is_constant(weight, constant_names, dtype)
        and (bias is None or _is_constant(bias, constant_names, dtype))
    )


def _is_constant(node, constant_names: set[str], dtype: torch.dtype) -> bool:
    return (
        isinstance(node, torch.fx.Node)
        and node.op == "placeholder"
        and node.name in constant_names
        and node.meta["val"].dtype == dtype
    )


def _fold_padding(conv: torch.fx.Node) -> bool:
    found = match(PADDED_CONVOLUTION, FxGraph(), conv)
    if found is None or conv.kwargs:
        return False
    spatial = conv.meta["val"].dim() - 2
    padding = list(found["padding"])
    sides = padded_sides(padding * spatial if len(padding) == 1 else padding, found["pads"])
    if sides is None or len(sides[0]) != spatial or sides[0] != sides[1]:
        return False  # uneven: `FuseKernelsPass` folds it into its own operator
    conv.args = (found["input"], *conv.args[1:4], sides[0], *conv.args[5:])
    return True
