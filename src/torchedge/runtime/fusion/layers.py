"""Load-time fusion of single layers: max pooling whose indices nobody reads, and zero padding
into the convolution after it."""

from __future__ import annotations

import functools

import numpy as np

from torchedge.kernels.portable.convolution import conv_forward
from torchedge.kernels.portable.pooling import max_pool_values
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import overlaps, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["max_pool_values_only", "padded_convolution"]


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
