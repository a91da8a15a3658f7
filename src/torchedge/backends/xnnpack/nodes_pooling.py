"""NHWC pooling nodes: max and average pooling over 2-D windows, global average pooling.

Max pooling pads with -inf (padding is never chosen); average pooling divides each window's
sum by the number of input elements it covers (XNNPACK leaves padding out of the count).
"""

from __future__ import annotations

import numpy as np

from torchedge.backends.xnnpack.nhwc_windows import Window, padded_input
from torchedge.backends.xnnpack.registry import builds

__all__: list[str] = []


def _window(node) -> Window:
    return Window(
        (node.pooling_height, node.pooling_width),
        (max(node.stride_height, 1), max(node.stride_width, 1)),
        (max(node.dilation_height, 1), max(node.dilation_width, 1)),
        (node.padding_top, node.padding_right, node.padding_bottom, node.padding_left),
    )


def _pool_operands(node, ctx, fill: float):
    x = ctx.value(node.input_id)
    ctx.check(x.ndim == 4, f"input has {x.ndim} dims, expected 4 (NHWC)")
    ctx.check(node.pooling_height > 0 and node.pooling_width > 0, "the pooling window is empty")
    window = _window(node)
    out = ctx.output(node.output_id)
    out_h, out_w = window.output_size(x.shape[1], x.shape[2])
    shape = (x.shape[0], out_h, out_w, x.shape[3])
    ctx.check(
        out_h > 0 and out_w > 0 and out.shape == shape, f"output has shape {list(out.shape)}, expected {list(shape)}"
    )
    padded, refresh = padded_input(x, window.padding, fill)
    return window.taps(padded, out_h, out_w), refresh, out, window, x


@builds("XNNMaxPooling2d")
def _max_pooling(node, ctx):
    taps, refresh, out, _, _ = _pool_operands(node, ctx, -np.inf)

    def step():
        if refresh is not None:
            refresh()
        np.copyto(out, taps[0])
        for view in taps[1:]:
            np.maximum(out, view, out=out)

    return step


def _covered(size: int, before: int, out_size: int, kernel: int, stride: int) -> np.ndarray:
    """How many input positions each output position's window covers along one dim."""
    start = np.arange(out_size) * stride - before
    return np.minimum(start + kernel, size) - np.maximum(start, 0)


@builds("XNNAvgPooling2d")
def _avg_pooling(node, ctx):
    taps, refresh, out, window, x = _pool_operands(node, ctx, 0.0)
    top, _, _, left = window.padding
    rows = _covered(x.shape[1], top, out.shape[1], window.kernel[0], window.stride[0])
    cols = _covered(x.shape[2], left, out.shape[2], window.kernel[1], window.stride[1])
    reciprocal = (1.0 / np.outer(rows, cols)).astype(out.dtype).reshape(1, out.shape[1], out.shape[2], 1)
    uniform = bool(np.all(reciprocal == reciprocal.flat[0]))
    scale = reciprocal.flat[0] if uniform else reciprocal

    def step():
        if refresh is not None:
            refresh()
        np.copyto(out, taps[0])
        for view in taps[1:]:
            np.add(out, view, out=out)
        np.multiply(out, scale, out=out)

    return step


@builds("XNNGlobalAvgPooling2d")
def _global_avg_pooling(node, ctx):
    """Mean over H and W of an NHWC input; the output keeps them as 1s (KEEP_DIMS) or drops them."""
    x = ctx.value(node.input_id)
    ctx.check(x.ndim == 4, f"input has {x.ndim} dims, expected 4 (NHWC)")
    out = ctx.output(node.output_id)
    n, _, _, c = x.shape
    ctx.check(out.size == n * c, f"output has shape {list(out.shape)}, expected {n} x {c} means")
    means = out.reshape(n, 1, 1, c)
    return lambda: np.mean(x, axis=(1, 2), keepdims=True, out=means)
