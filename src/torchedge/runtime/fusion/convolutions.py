"""Load-time fusion of convolutions: a ``convolution`` with the zero padding before it and the
clamp after it, and MobileNetV2's inverted residual block (a 1x1 expansion, a depthwise
convolution, a 1x1 projection, their paddings and clamps) as one channels-last kernel, in
default programs and in those made with ``fuse_kernels=True`` (``conv_bn_act`` without a batch
norm)."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from torchedge.kernels.portable.bounds import clamp_by_numbers
from torchedge.kernels.portable.common import pair
from torchedge.kernels.portable.convolution import conv_forward
from torchedge.kernels.portable.fused import FLOATS
from torchedge.kernels.portable.inverted_residual import DepthwiseGeometry, inverted_residual
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import overlaps, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["CONVOLUTIONS", "convolution_block", "inverted_residual_block"]

CONVOLUTION = "aten::convolution.out"
CONV_BN_ACT = "torchedge_fused::conv_bn_act.out"
CONVOLUTIONS = (CONVOLUTION, CONV_BN_ACT)

# The activations a convolution absorbs: (low, high) bounds from the operator's arguments.
CONVOLUTION_ACTIVATIONS = {
    "aten::relu.out": lambda args: (0, None),
    "aten::hardtanh.out": lambda args: (args[1], args[2]),
    "aten::clamp.out": lambda args: (args[1], args[2]),
}

# Depthwise convolutions with output planes up to this many positions run their block
# channels-last (measured on mobilenet_v2: 0.65-0.85x at 28x28 and below, a tie at 56x56).
_BLOCK_POSITIONS = 32 * 32


class Convolution(NamedTuple):
    """A forward convolution as a fused kernel sees it: its steps (the zero padding before it and
    the clamp after it included), the values it reads, its geometry and its clamp's bounds."""

    steps: set[int]
    x: int  # read by the first step
    weight: int
    bias: int
    stride: tuple
    before: tuple
    after: tuple
    dilation: tuple
    groups: int
    bounds: tuple | None
    result: tuple[int, int]  # (step, value) of the last write

    def pointwise(self, flow: Dataflow) -> bool:
        """A 1x1 convolution of one group, unit stride, no padding."""
        weight = value_of(flow, self.weight)
        return (
            self.groups == 1
            and weight.shape[2:] == (1, 1)
            and self.stride == (1, 1)
            and not any(self.before + self.after)
        )


def convolution_block(flow: Dataflow, pc: int):
    """A ``convolution`` with the zero padding before it (``constant_pad_nd``: TensorFlow-style
    "same" padding pads one side only) and the clamp after it (``relu``, ``hardtanh``, ``clamp``
    by numbers) when the convolution's result has no other reader: the zeros become the
    convolution's own padding, per side, and the clamp runs in place on its result."""
    conv = _convolution(flow, pc)
    if conv is None or len(conv.steps) == 1:  # (anchored at `convolution` steps only)
        return []
    inputs = [(min(conv.steps), conv.x), (pc, conv.weight), (pc, conv.bias)]
    if not replaceable(flow, conv.steps, [conv.result], inputs):
        return []
    out = conv.result[1]
    result = value_of(flow, out)
    scratch = np.empty(result.shape, result.dtype) if overlaps(flow, out, [conv.x, conv.weight, conv.bias]) else None
    geometry = (conv.stride, conv.before, conv.after, conv.dilation, conv.groups)
    fn = functools.partial(_convolve, *geometry, conv.bounds, scratch)
    return [(conv.steps, Step(KERNEL, fn, (conv.x, conv.weight, conv.bias, out), out, _label(flow, conv.steps)))]


def inverted_residual_block(flow: Dataflow, pc: int):
    """A depthwise convolution (one 2-D filter per channel) whose input is a 1x1 expansion
    (maybe clamped, maybe zero-padded) read by nothing else and whose result (maybe clamped)
    only a 1x1 projection reads: `inverted_residual`, on output planes small enough that it pays."""
    depthwise = _convolution(flow, pc)
    if depthwise is None:
        return []
    x, weight, out = (value_of(flow, i) for i in (depthwise.x, depthwise.weight, depthwise.result[1]))
    if weight.ndim != 4 or weight.shape[1] != 1 or not depthwise.groups == weight.shape[0] == x.shape[1] > 1:
        return []
    if math.prod(out.shape[2:]) > _BLOCK_POSITIONS:
        return []
    expand = _convolution_writing(flow, min(depthwise.steps), depthwise.x)
    project = _convolution_reading(flow, depthwise.result)
    if expand is None or project is None or not expand.pointwise(flow) or not project.pointwise(flow):
        return []
    projection = min(project.steps)  # a clamp after it stays a step of its own: the block's result is its input
    if flow.steps[projection].label == CONV_BN_ACT and project.bounds is not None:
        return []
    out_index = flow.steps[projection].args[-1]
    group = expand.steps | depthwise.steps | {projection}
    constants = [(min(c.steps), i) for c in (expand, depthwise, project) for i in (c.weight, c.bias)]
    arrays = [value_of(flow, i) for i in (expand.x, out_index)]
    written = [value_of(flow, flow.steps[i].args[-1]) for i in group]  # every tensor the block computes
    tensors = arrays + written + [value_of(flow, i) for _, i in constants if value_of(flow, i) is not None]
    if len({a.dtype for a in tensors}) != 1 or arrays[0].dtype not in FLOATS or arrays[0].ndim != 4 or x.ndim != 4:
        return []
    if not all(a.flags.c_contiguous for a in arrays) or overlaps(flow, out_index, [i for _, i in constants]):
        return []
    if not replaceable(flow, group, [(projection, out_index)], [(min(expand.steps), expand.x), *constants]):
        return []
    geometry = DepthwiseGeometry(depthwise.stride, depthwise.before, depthwise.dilation)
    fn = functools.partial(inverted_residual, expand.bounds, geometry, depthwise.bounds)
    args = (expand.x, *(i for _, i in constants), out_index)
    return [(group, Step(KERNEL, fn, args, out_index, _label(flow, group)))]


def _convolution(flow: Dataflow, pc: int) -> Convolution | None:
    """Step ``pc`` as a `Convolution`: a forward ``convolution`` with the zeros padded before it
    and the clamp after it, or a ``conv_bn_act`` without a batch norm; None for anything else
    (a transposed convolution, arguments out of range)."""
    step = flow.steps[pc]
    if step.label == CONV_BN_ACT:
        x, w, b, stride, before, after, dilation, groups, _, _, mean, _, _, activation, low, high, out = step.args
        bounds = {"none": None, "relu": (0, None), "hardtanh": (value_of(flow, low), value_of(flow, high))}
        if value_of(flow, mean) is not None or value_of(flow, activation) not in bounds:
            return None
        stride, before, after, dilation = (tuple(value_of(flow, i)) for i in (stride, before, after, dilation))
        clamp = bounds[value_of(flow, activation)]
        return Convolution({pc}, x, w, b, stride, before, after, dilation, value_of(flow, groups), clamp, (pc, out))
    if step.label != CONVOLUTION:
        return None
    x, w, b, stride, padding, dilation, transposed, _, groups, _ = step.args
    spatial = value_of(flow, w).ndim - 2
    if value_of(flow, transposed) or spatial < 1:
        return None
    padding, stride, dilation = (
        pair(value_of(flow, v), spatial, name, CONVOLUTION)
        for v, name in ((padding, "padding"), (stride, "stride"), (dilation, "dilation"))
    )
    if min(padding) < 0 or min(stride) < 1 or min(dilation) < 1:
        return None
    steps, before, after = {pc}, tuple(padding), tuple(padding)
    pad_pc = flow.producer(pc, x)
    if pad_pc is not None and flow.steps[pad_pc].label == "aten::constant_pad_nd.out":
        source, pad, fill, _ = (value_of(flow, i) for i in flow.steps[pad_pc].args)
        if fill == 0 and source.ndim == spatial + 2 and len(pad) == 2 * spatial and min(pad) >= 0:
            # constant_pad_nd's pairs run from the last dim backwards: (before, after) of dim -1, then -2, ...
            before = tuple(p + pad[2 * (spatial - 1 - d)] for d, p in enumerate(padding))
            after = tuple(p + pad[2 * (spatial - 1 - d) + 1] for d, p in enumerate(padding))
            steps.add(pad_pc)
            x = flow.steps[pad_pc].args[0]
    bounds, result = _clamp_after(flow, pc)
    steps.add(result[0])
    return Convolution(
        steps, x, w, b, tuple(stride), before, after, tuple(dilation), value_of(flow, groups), bounds, result
    )


def _convolution_writing(flow: Dataflow, pc: int, value: int) -> Convolution | None:
    """The `Convolution` whose last write is what step ``pc`` reads as ``value``, if one is."""
    producer = flow.producer(pc, value)
    if producer is None:
        return None
    start: int | None = producer
    if flow.steps[producer].label in CONVOLUTION_ACTIVATIONS:
        start = flow.producer(producer, flow.steps[producer].args[0])
    conv = None if start is None else _convolution(flow, start)
    return conv if conv is not None and conv.result[0] == producer and min(conv.steps) == start else None


def _convolution_reading(flow: Dataflow, result: tuple[int, int]) -> Convolution | None:
    """The `Convolution` that alone reads what (step, value) ``result`` wrote, if one does."""
    readers = flow.readers(*result)
    reader = next(iter(readers)) if len(readers) == 1 else -1
    if reader < 0 or flow.producer(reader, flow.steps[reader].args[0]) != result[0]:
        return None
    conv = _convolution(flow, reader)
    return conv if conv is not None and min(conv.steps) == reader else None


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


def _label(flow: Dataflow, group: set[int]) -> str:
    return " + ".join(flow.steps[i].label.split("::")[1] for i in sorted(group)) + " (fused at load)"


def _convolve(stride, before, after, dilation, groups, bounds, scratch, x, weight, bias, out) -> None:
    """The convolution of the unpadded input, then the clamp in place; through ``scratch`` when
    ``out`` overlaps an operand."""
    target = out if scratch is None else scratch
    conv_forward(x, weight, bias, stride, before, dilation, groups, target, after)
    if bounds is not None:
        clamp_by_numbers(target, bounds[0], bounds[1], target)
    if scratch is not None:
        np.copyto(out, scratch)
