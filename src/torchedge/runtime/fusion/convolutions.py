"""Load-time fusion of convolutions: a ``convolution`` with the zero padding before it and the
clamp after it, and MobileNetV2's inverted residual block (a 1x1 expansion, a depthwise
convolution, a 1x1 projection, their paddings and clamps) as one channels-last kernel."""

from __future__ import annotations

import functools
import math

import numpy as np

from torchedge.kernels.portable.bounds import clamp_by_numbers
from torchedge.kernels.portable.common import pair
from torchedge.kernels.portable.convolution import conv_forward
from torchedge.kernels.portable.fused import FLOATS
from torchedge.kernels.portable.inverted_residual import DepthwiseGeometry, inverted_residual
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import overlaps, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["convolution_block", "inverted_residual_block"]

_OP = "aten::convolution.out"

# The activations a convolution absorbs: (low, high) bounds from the operator's arguments.
CONVOLUTION_ACTIVATIONS = {
    "aten::relu.out": lambda args: (0, None),
    "aten::hardtanh.out": lambda args: (args[1], args[2]),
    "aten::clamp.out": lambda args: (args[1], args[2]),
}

# Depthwise convolutions with output planes up to this many positions run their block
# channels-last (measured on mobilenet_v2: 0.65-0.85x at 28x28 and below, a tie at 56x56).
_BLOCK_POSITIONS = 32 * 32


def convolution_block(flow: Dataflow, pc: int):
    """A ``convolution`` with the zero padding before it (``constant_pad_nd``: TensorFlow-style
    "same" padding pads one side only) and the clamp after it (``relu``, ``hardtanh``, ``clamp``
    by numbers) when the convolution's result has no other reader: the zeros become the
    convolution's own padding, per side, and the clamp runs in place on its result."""
    step = flow.steps[pc]
    groups, out = (value_of(flow, step.args[i]) for i in (8, 9))
    geometry = _geometry(flow, pc)
    if geometry is None:
        return []
    group, x, (stride, before, after, dilation) = geometry
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
    fn = functools.partial(_convolve, stride, before, after, dilation, groups, bounds, scratch)
    return [(group, Step(KERNEL, fn, (x, step.args[1], step.args[2], out_index), out_index, _label(flow, group)))]


def inverted_residual_block(flow: Dataflow, pc: int):
    """A depthwise ``convolution`` (one 2-D filter per channel) whose input is a 1x1 expansion
    (maybe clamped, maybe zero-padded) read by nothing else and whose result (maybe clamped) only
    a 1x1 projection reads: `inverted_residual`, on output planes small enough that it pays."""
    step = flow.steps[pc]
    x, weight, groups, out = (value_of(flow, step.args[i]) for i in (0, 1, 8, 9))
    if weight.ndim != 4 or weight.shape[1] != 1 or not groups == weight.shape[0] == x.shape[1] > 1:
        return []
    geometry = _geometry(flow, pc)
    if geometry is None or math.prod(out.shape[2:]) > _BLOCK_POSITIONS:
        return []
    group, source, (stride, before, _, dilation) = geometry
    expansion, expand_bounds = _expansion(flow, min(group), source)
    bounds, result = _clamp_after(flow, pc)
    projection = _projection(flow, result)
    if expansion is None or projection is None:
        return []
    group |= expansion | {result[0], projection}
    expand, project = flow.steps[min(expansion)], flow.steps[projection]
    x_index, out_index = expand.args[0], project.args[-1]
    constants = [(min(expansion), expand.args[1]), (min(expansion), expand.args[2])]
    constants += [(pc, step.args[1]), (pc, step.args[2]), (projection, project.args[1]), (projection, project.args[2])]
    arrays = [value_of(flow, i) for i in (x_index, out_index)]
    tensors = arrays + [value_of(flow, i) for _, i in constants if value_of(flow, i) is not None]
    if len({a.dtype for a in tensors}) != 1 or arrays[0].dtype not in FLOATS:
        return []
    if not all(a.flags.c_contiguous for a in arrays) or overlaps(flow, out_index, [i for _, i in constants]):
        return []
    if not replaceable(flow, group, [(projection, out_index)], [(min(expansion), x_index), *constants]):
        return []
    fn = functools.partial(inverted_residual, expand_bounds, DepthwiseGeometry(stride, before, dilation), bounds)
    args = (x_index, *(i for _, i in constants), out_index)
    return [(group, Step(KERNEL, fn, args, out_index, _label(flow, group)))]


def _projection(flow: Dataflow, result: tuple[int, int]) -> int | None:
    """The 1x1 convolution that alone reads what (step, value) ``result`` wrote, if one does."""
    readers = flow.readers(*result)
    reader = next(iter(readers)) if len(readers) == 1 else -1
    if reader < 0 or not _pointwise(flow, reader) or flow.producer(reader, flow.steps[reader].args[0]) != result[0]:
        return None
    return reader


def _geometry(flow: Dataflow, pc: int):
    """({pc} and the ``constant_pad_nd`` of zeros before it, the tensor the two read,
    (stride, padding before, padding after, dilation)) of convolution ``pc``, or None for
    a transposed convolution or arguments out of range."""
    step = flow.steps[pc]
    _, weight, _, stride, padding, dilation, transposed, _, _, _ = (value_of(flow, i) for i in step.args)
    spatial = weight.ndim - 2
    if transposed or spatial < 1:
        return None
    padding, stride, dilation = (
        pair(v, spatial, name, _OP) for v, name in ((padding, "padding"), (stride, "stride"), (dilation, "dilation"))
    )
    if min(padding) < 0 or min(stride) < 1 or min(dilation) < 1:
        return None
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
    return group, x, (tuple(stride), before, after, tuple(dilation))


def _pointwise(flow: Dataflow, pc: int) -> bool:
    """Whether step ``pc`` is a 1x1 ``convolution`` of one group, unit stride, no padding."""
    step = flow.steps[pc]
    if step.label != _OP:
        return False
    _, weight, _, stride, padding, _, transposed, _, groups, _ = (value_of(flow, i) for i in step.args)
    return (
        not transposed
        and groups == 1
        and weight.ndim == 4
        and weight.shape[2:] == (1, 1)
        and pair(stride, 2, "stride", _OP) == (1, 1)
        and pair(padding, 2, "padding", _OP) == (0, 0)
    )


def _expansion(flow: Dataflow, pc: int, source: int):
    """(the steps of the 1x1 convolution and the clamp after it that wrote ``source``, the
    clamp's bounds) when they did and nothing else reads what they wrote, else (None, None)."""
    producer = flow.producer(pc, source)
    convolution = producer
    if producer is not None and flow.steps[producer].label in CONVOLUTION_ACTIVATIONS:
        convolution = flow.producer(producer, flow.steps[producer].args[0])
    if producer is None or convolution is None or not _pointwise(flow, convolution):
        return None, None
    bounds, result = _clamp_after(flow, convolution)
    if result[0] != producer:
        return None, None
    return {convolution, producer}, bounds


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
