"""XNNPACK's shape rules, node kind by node kind: the dims of a node's output given its inputs'
(broadcasting, fully connected rows, reshape with its one inferred dim, concatenation, transposes,
slices of whole dims, windows...), as ``xnn_reshape_runtime`` propagates them. The interpreter
(`graph`) uses them to run a payload exported with dynamic dimensions at a call's own shapes."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from torchedge.errors import InvalidProgramError

__all__ = ["output_dims", "slice_dims"]

_UNARY_KINDS = frozenset(
    "XNN" + kind
    for kind in (
        "Softmax Sigmoid Clamp Floor Convert SquareRoot Ceiling Hardswish LeakyReLU Negate Square ELU Abs "
        "ReciprocalSquareRoot Log Gelu Tanh Exp Sin Copy Cos"
    ).split()
)
_BROADCAST_KINDS = frozenset(("XNNAdd", "XNNSubtract", "XNNMultiply", "XNNDiv", "XNNMaximum", "XNNMinimum", "XNNPReLU"))
_TRANSPOSE_B = 0x1  # XNN_FLAG_TRANSPOSE_WEIGHTS / XNN_FLAG_TRANSPOSE_B


def _window(size: int, before: int, after: int, kernel: int, stride: int, dilation: int) -> int:
    return (size + before + after - max(dilation, 1) * (kernel - 1) - 1) // max(stride, 1) + 1


def output_dims(node, kind: str, dims: Callable[[int], tuple[int, ...]], payload: tuple[int, ...]) -> tuple | None:
    """The dims of ``node``'s output given its inputs' (``dims(value_id)``), XNNPACK's shape rule
    for the node kind; ``payload`` is the output's dims in the payload (its upper bound). None for
    a node kind with no rule here (its inputs must keep their payload dims)."""
    if kind in _UNARY_KINDS:
        return dims(node.input_id)
    if kind in _BROADCAST_KINDS:
        return tuple(np.broadcast_shapes(dims(node.input1_id), dims(node.input2_id)))
    if kind == "XNNFullyConnected":
        x = dims(node.input1_id)
        if len(payload) == len(x):
            return x[:-1] + payload[-1:]
        return (math.prod(x[:-1]),) + payload[-1:]
    if kind == "XNNBatchMatrixMultiply":
        a, b = dims(node.input1_id), dims(node.input2_id)
        columns = b[-2] if node.flags & _TRANSPOSE_B else b[-1]
        return tuple(np.broadcast_shapes(a[:-2], b[:-2])) + (a[-2], columns)
    if kind == "XNNStaticTranspose":
        x = dims(node.input_id)
        return tuple(x[p] for p in node.perm)
    if kind == "XNNStaticReshape":
        size, shape = math.prod(dims(node.input_id)), list(node.new_shape)
        known = math.prod(d for d in shape if d)
        if shape.count(0) != 1 or not known or size % known:
            raise InvalidProgramError(f"a reshape to {shape} (static: no 0 dim to infer) cannot take {size} elements")
        return tuple(d or size // known for d in shape)
    if kind == "XNNStaticSlice":
        return None
    if kind.startswith("XNNConcatenate"):
        ids = [node.input1_id, node.input2_id, node.input3_id, node.input4_id, node.input5_id][: int(kind[-1])]
        parts = [dims(i) for i in ids]
        out = list(parts[0])
        out[node.axis] = sum(p[node.axis] for p in parts)
        return tuple(out)
    if kind == "XNNStaticConstantPad":
        return tuple(n + a + b for n, a, b in zip(dims(node.input_id), node.pre_paddings, node.post_paddings))
    if kind in ("XNNConv2d", "XNNDepthwiseConv2d"):
        n, h, w, _ = dims(node.input1_id)
        return (
            n,
            _window(
                h,
                node.padding_top,
                node.padding_bottom,
                node.kernel_height,
                node.subsampling_height,
                node.dilation_height,
            ),
            _window(
                w, node.padding_left, node.padding_right, node.kernel_width, node.subsampling_width, node.dilation_width
            ),
            payload[-1],
        )
    if kind == "XNNConvTranspose2d":
        n, h, w, _ = dims(node.input1_id)
        dh, dw = max(node.dilation_height, 1), max(node.dilation_width, 1)
        return (
            n,
            node.subsampling_height * (h - 1)
            + node.adjustment_height
            + dh * (node.kernel_height - 1)
            + 1
            - node.padding_top
            - node.padding_bottom,
            node.subsampling_width * (w - 1)
            + node.adjustment_width
            + dw * (node.kernel_width - 1)
            + 1
            - node.padding_left
            - node.padding_right,
            payload[-1],
        )
    if kind in ("XNNMaxPooling2d", "XNNAvgPooling2d"):
        n, h, w, c = dims(node.input_id)
        return (
            n,
            _window(
                h, node.padding_top, node.padding_bottom, node.pooling_height, node.stride_height, node.dilation_height
            ),
            _window(
                w, node.padding_left, node.padding_right, node.pooling_width, node.stride_width, node.dilation_width
            ),
            c,
        )
    if kind == "XNNGlobalAvgPooling2d":
        n, _, _, c = dims(node.input_id)
        return (n, 1, 1, c) if len(payload) == 4 else (n, c)
    if kind == "XNNStaticResizeBilinear2D":
        n, _, _, c = dims(node.input_id)
        return (n, node.new_height, node.new_width, c)
    if kind == "XNNScaledDotProductAttention":
        return dims(node.query_id)[:-1] + dims(node.value_id)[-1:]
    return None


def slice_dims(node, x: tuple[int, ...], payload_in: tuple[int, ...]) -> tuple[int, ...]:
    """A slice keeps its sizes, except over a whole dim of the payload's input (offset 0, the
    payload's size), which follows the input: a slice along another dim of a dynamic one."""
    return tuple(
        n if o == 0 and size == bound else size for n, o, size, bound in zip(x, node.offsets, node.sizes, payload_in)
    )
