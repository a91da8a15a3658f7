"""Load-time fusion of single layers: max pooling whose indices nobody reads, a convolution with
the zero padding before it and the clamp after it, and a linear layer's activation."""

from __future__ import annotations

import functools

import numpy as np

from torchedge.kernels.portable.bounds import clamp_by_numbers
from torchedge.kernels.portable.common import pair
from torchedge.kernels.portable.convolution import conv_forward
from torchedge.kernels.portable.fused import FLOATS, linear_act
from torchedge.kernels.portable.pooling import max_pool_values
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import Match, overlaps, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["LINEAR_ACTIVATIONS", "convolution_block", "linear_activation", "max_pool_values_only"]


def max_pool_values_only(flow: Dataflow, pc: int):
    """A ``max_pool*_with_indices`` whose indices nothing reads: `max_pool_values`."""
    step = flow.steps[pc]
    *arguments, out, indices = step.args
    if flow.readers(pc, indices) or len(arguments) != 6:
        return []
    dims = 2 if step.label.startswith("aten::max_pool2d") else 3
    fn = functools.partial(max_pool_values, step.label, dims)
    return [({pc}, Step(KERNEL, fn, (*arguments, out), out, f"{step.label} (values only)"))]


# The activations a convolution absorbs: (low, high) bounds from the operator's arguments.
CONVOLUTION_ACTIVATIONS = {
    "aten::relu.out": lambda args: (0, None),
    "aten::hardtanh.out": lambda args: (args[1], args[2]),
    "aten::clamp.out": lambda args: (args[1], args[2]),
}


def convolution_block(flow: Dataflow, pc: int):
    """A ``convolution`` with the zero padding before it (``constant_pad_nd``: TensorFlow-style
    "same" padding pads one side only) and the clamp after it (``relu``, ``hardtanh``, ``clamp``
    by numbers) when the convolution's result has no other reader: the zeros become the
    convolution's own padding, per side, and the clamp runs in place on its result."""
    step = flow.steps[pc]
    _, weight, _, stride, padding, dilation, transposed, _, groups, out = (value_of(flow, i) for i in step.args)
    spatial = weight.ndim - 2
    if transposed or spatial < 1:
        return []
    padding, stride, dilation = (
        pair(v, spatial, name, step.label)
        for v, name in ((padding, "padding"), (stride, "stride"), (dilation, "dilation"))
    )
    if min(padding) < 0 or min(stride) < 1 or min(dilation) < 1:
        return []
    group, x, before, after = {pc}, step.args[0], tuple(padding), tuple(padding)
    pad_pc = flow.producer(pc, x)
    if pad_pc is not None and flow.steps[pad_pc].label == "aten::constant_pad_nd.out":
        source, pad, fill, _ = (value_of(flow, i) for i in flow.steps[pad_pc].args)
        if fill == 0 and source.ndim == spatial + 2 and len(pad) == 2 * spatial and min(pad) >= 0:
            # constant_pad_nd's pairs run from the last dim backwards: (before, after) of dim -1, then -2, ...
            before = tuple(p + pad[2 * (spatial - 1 - d)] for d, p in enumerate(padding))
            after = tuple(p + pad[2 * (spatial - 1 - d) + 1] for d, p in enumerate(padding))
            group.add(pad_pc)
            x = flow.steps[pad_pc].args[0]
    bounds, result = _clamp_after(flow, pc)
    if bounds is not None:
        group.add(result[0])
    if len(group) == 1:
        return []
    inputs = [(min(group), x), (pc, step.args[1]), (pc, step.args[2])]
    if not replaceable(flow, group, [result], inputs):
        return []
    out_index = result[1]
    scratch = np.empty(out.shape, out.dtype) if overlaps(flow, out_index, [x, step.args[1], step.args[2]]) else None
    fn = functools.partial(_convolve, tuple(stride), before, after, tuple(dilation), groups, bounds, scratch)
    fused = " + ".join(flow.steps[i].label.split("::")[1] for i in sorted(group))
    return [
        (group, Step(KERNEL, fn, (x, step.args[1], step.args[2], out_index), out_index, f"{fused} (fused at load)"))
    ]


def _clamp_after(flow: Dataflow, pc: int):
    """The bounds of the float clamp that alone reads convolution ``pc``'s result, and the
    (step, value) it writes; (None, the convolution's own write) when there is none."""
    out = flow.steps[pc].args[-1]
    alone = None, (pc, out)
    readers = flow.readers(pc, out)
    reader = next(iter(readers)) if len(readers) == 1 else -1
    step = flow.steps[reader] if reader >= 0 else None
    if step is None or step.label not in CONVOLUTION_ACTIVATIONS or flow.producer(reader, step.args[0]) != pc:
        return alone
    result = value_of(flow, out)
    if result.dtype not in FLOATS or value_of(flow, step.args[-1]).shape != result.shape:
        return alone
    bounds = CONVOLUTION_ACTIVATIONS[step.label]([value_of(flow, i) for i in step.args])
    if bounds == (None, None) or not all(
        b is None or (isinstance(b, (int, float)) and b is not True and b is not False) for b in bounds
    ):
        return alone
    return bounds, (reader, step.args[-1])


def _convolve(stride, before, after, dilation, groups, bounds, scratch, x, weight, bias, out) -> None:
    """The convolution of the unpadded input, then the clamp in place; through ``scratch`` when
    ``out`` overlaps an operand."""
    target = out if scratch is None else scratch
    conv_forward(x, weight, bias, stride, before, dilation, groups, target, after)
    if bounds is not None:
        clamp_by_numbers(target, bounds[0], bounds[1], target)
    if scratch is not None:
        np.copyto(out, scratch)


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
