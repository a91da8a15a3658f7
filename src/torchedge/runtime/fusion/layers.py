"""Load-time fusion of single layers: max pooling whose indices nobody reads, zero padding into
the convolution after it, and a linear layer's activation into its product."""

from __future__ import annotations

import functools

import numpy as np

from torchedge.kernels.portable.convolution import conv_forward
from torchedge.kernels.portable.fused import linear_act
from torchedge.kernels.portable.pooling import max_pool_values
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import Match, overlaps, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["LINEAR_ACTIVATIONS", "linear_activation", "max_pool_values_only", "padded_convolution"]


def max_pool_values_only(flow: Dataflow, pc: int):
    step = flow.steps[pc]
    *arguments, out, indices = step.args
    if flow.readers(pc, indices) or len(arguments) != 6:
        return []
    dims = 2 if step.label.startswith("aten::max_pool2d") else 3
    fn = functools.partial(max_pool_values, step.label, dims)
    return [({pc}, Step(KERNEL, fn, (*arguments, out), out, f"{step.label} (values only)"))]


def padded_convolution(flow: Dataflow, pc: int):
    """``convolution(constant_pad_nd(x, pad, 0))``: the zeros become the convolution's own
    padding, per side (TensorFlow-style "same" padding of strided layers pads one side only)."""
    step = flow.steps[pc]
    _, weight, _, stride, padding, dilation, transposed, _, groups, out = (value_of(flow, i) for i in step.args)
    pad_pc = flow.producer(pc, step.args[0])
    if pad_pc is None or flow.steps[pad_pc].label != "aten::constant_pad_nd.out" or transposed:
        return []
    source, pad, fill, _ = (value_of(flow, i) for i in flow.steps[pad_pc].args)
    spatial = weight.ndim - 2
    if fill != 0 or source.ndim != spatial + 2 or len(pad) != 2 * spatial or min(pad) < 0:
        return []
    padding = list(padding) * spatial if len(padding) == 1 else list(padding)
    stride = list(stride) * spatial if len(stride) == 1 else list(stride)
    dilation = list(dilation) * spatial if len(dilation) == 1 else list(dilation)
    if len(padding) != spatial or min(padding) < 0 or min(stride) < 1 or min(dilation) < 1 or groups < 1:
        return []
    # constant_pad_nd's pairs run from the last dim backwards: (before, after) of dim -1, then -2, ...
    before = tuple(p + pad[2 * (spatial - 1 - d)] for d, p in enumerate(padding))
    after = tuple(p + pad[2 * (spatial - 1 - d) + 1] for d, p in enumerate(padding))
    x = flow.steps[pad_pc].args[0]
    group = {pad_pc, pc}
    if not replaceable(flow, group, (pc, step.args[-1]), [(pad_pc, x), (pc, step.args[1]), (pc, step.args[2])]):
        return []
    scratch = np.empty(out.shape, out.dtype) if overlaps(flow, step.args[-1], [x]) else None
    fn = functools.partial(_convolve, tuple(stride), before, after, tuple(dilation), groups, scratch)
    args = (x, step.args[1], step.args[2], step.args[-1])
    return [(group, Step(KERNEL, fn, args, step.args[-1], f"{step.label} (padding fused at load)"))]


def _convolve(stride, before, after, dilation, groups, scratch, x, weight, bias, out) -> None:
    """The convolution of the unpadded input; through ``scratch`` when ``out`` overlaps it."""
    conv_forward(x, weight, bias, stride, before, dilation, groups, out if scratch is None else scratch, after)
    if scratch is not None:
        np.copyto(out, scratch)


# -- a linear layer's activation ------------------------------------------------------------------

# The activation operators, by the name `linear_act` gives them; silu as core ATen writes it,
# ``mul(x, sigmoid(x))``, is anchored at the ``mul``.
LINEAR_ACTIVATIONS = {"aten::relu.out": "relu", "aten::gelu.out": "gelu", "aten::mul.out": "silu"}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def linear_activation(flow: Dataflow, pc: int):
    """``activation(addmm(bias, x, w))`` or ``activation(mm(x, w))``, the product maybe seen in
    another shape: `linear_act`, which applies the activation in place while the product is
    still in the cache."""
    match = Match(flow)
    match.group.add(pc)
    step = flow.steps[pc]
    activation = LINEAR_ACTIVATIONS[step.label]
    if activation == "silu":
        x, gate = step.args[:2]
        sigmoid = match.step(pc, 1, "aten::sigmoid.out")
        if sigmoid is None or flow.steps[sigmoid].args[0] != x or flow.producer(sigmoid, x) != flow.producer(pc, x):
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
    if {a.dtype for a in arrays} != {arrays[0].dtype} or arrays[0].dtype not in _FLOATS:
        return []
    inputs = [(product, x), (product, weight)] + ([] if bias is None else [(product, bias)])
    if not replaceable(flow, match.group, (pc, out), inputs):
        return []
    shape = value_of(flow, flow.steps[product].args[-1]).shape
    fn = functools.partial(_linear, activation, shape)  # matmul copies an operand that out overlaps
    args = (x, weight, out) if bias is None else (x, weight, out, bias)
    label = f"torchedge_fused::linear_act.out ({activation}, fused at load)"
    return [(match.group, Step(KERNEL, fn, args, out, label))]


def _linear(activation: str, shape: tuple, x, weight, out, bias=None) -> None:
    linear_act(x, weight, bias, activation, out.reshape(shape))
