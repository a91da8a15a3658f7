"""Load-time fusion of single layers: max pooling whose indices nobody reads and a linear layer's
activation (convolutions: `convolutions`)."""

from __future__ import annotations

import functools

from torchedge.kernels.portable.fused import FLOATS, linear_act
from torchedge.kernels.portable.pooling import max_pool_values
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import Match, overlaps, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["LINEAR_ACTIVATIONS", "linear_activation", "max_pool_values_only"]


def max_pool_values_only(flow: Dataflow, pc: int):
    """A ``max_pool*_with_indices`` whose indices nothing reads: `max_pool_values`."""
    step = flow.steps[pc]
    *arguments, out, indices = step.args
    if flow.readers(pc, indices) or len(arguments) != 6:
        return []
    dims = 2 if step.label.startswith("aten::max_pool2d") else 3
    fn = functools.partial(max_pool_values, step.label, dims)
    return [({pc}, Step(KERNEL, fn, (*arguments, out), out, f"{step.label} (values only)"))]


# -- a linear layer's activation ------------------------------------------------------------------

# The activation operators, by the name `linear_act` gives them; silu as core ATen writes it,
# ``mul(x, sigmoid(x))``, is anchored at the ``mul``.
LINEAR_ACTIVATIONS = {"aten::relu.out": "relu", "aten::gelu.out": "gelu", "aten::mul.out": "silu"}


def linear_activation(flow: Dataflow, pc: int):
    """``activation(addmm(bias, x, w))`` or ``activation(mm(x, w))``, the product maybe seen in
    another shape: `linear_act`, which applies the activation in place while the product is
    still in the cache."""
    match = Match(flow)
    match.group.add(pc)
    step = flow.steps[pc]
    activation = LINEAR_ACTIVATIONS[step.label]
    if activation == "silu":
        gated = step.args[0]
        sigmoid = match.step(pc, 1, "aten::sigmoid.out")
        if (
            sigmoid is None
            or flow.steps[sigmoid].args[0] != gated
            or flow.producer(sigmoid, gated) != flow.producer(pc, gated)
        ):
            return []
    elif activation == "gelu" and value_of(flow, step.args[1]) != "none":
        return []
    product = flow.producer(pc, step.args[0])
    if product is None or flow.steps[product].label not in ("aten::addmm.out", "aten::mm.out"):
        return []
    match.group.add(product)
    if flow.steps[product].label == "aten::addmm.out":
        bias, x, weight, beta, alpha, _ = flow.steps[product].args
        if value_of(flow, beta) != 1 or value_of(flow, alpha) != 1 or value_of(flow, bias).ndim != 1:
            return []
    else:
        x, weight, _ = flow.steps[product].args
        bias = None
    out = step.args[-1]
    arrays = [value_of(flow, i) for i in (x, weight, out) + (() if bias is None else (bias,))]
    if {a.dtype for a in arrays} != {arrays[0].dtype} or arrays[0].dtype not in FLOATS:
        return []
    inputs = [(product, x), (product, weight)] + ([] if bias is None else [(product, bias)])
    if not replaceable(flow, match.group, [(pc, out)], inputs) or (bias is not None and overlaps(flow, out, [bias])):
        return []  # (the bias is added after the product is written; matmul copies an operand out overlaps)
    shape = value_of(flow, flow.steps[product].args[-1]).shape
    fn = functools.partial(_linear, activation, shape)
    args = (x, weight, out) if bias is None else (x, weight, out, bias)
    label = f"torchedge_fused::linear_act.out ({activation}, fused at load)"
    return [(match.group, Step(KERNEL, fn, args, out, label))]


def _linear(activation: str, shape: tuple, x, weight, out, bias=None) -> None:
    linear_act(x, weight, bias, activation, out.reshape(shape))
