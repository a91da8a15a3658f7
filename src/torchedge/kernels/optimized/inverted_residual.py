"""MobileNetV2's inverted residual block (a 1x1 expansion and its clamp, a depthwise convolution
and its clamp, a 1x1 projection) as one kernel that keeps the expanded channels channels-last.

Planar, the depthwise taps of a small plane are short rows (7-28 elements), a NumPy loop each;
channels-last, a row of a tap runs over the whole width times the channels. The two GEMMs
change layout for free: the expansion multiplies the transposed input (copied with a column
of ones, for the bias) into (H*W, C) rows, the projection multiplies by the transposed sum
into the planar result. That beats the three convolutions on small output planes, whose
planar rows are short; on large planes the planar paths' rows are long already and the three
convolutions win (`benchmarks/` measures both).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from torchedge.kernels.optimized.clamp_rows import clamp_by_numbers
from torchedge.kernels.optimized.convolution import bias_column_weights
from torchedge.kernels.optimized.convolution_columns import sum_taps_channels_last
from torchedge.kernels.optimized.derived_arrays import derived
from torchedge.kernels.optimized.scratch import per_call, scratch

__all__ = ["DepthwiseGeometry", "inverted_residual"]


class DepthwiseGeometry(NamedTuple):
    """A depthwise convolution's stride, zeros before each spatial dim, and dilation (the
    output's size says how many zeros follow)."""

    stride: tuple[int, int]
    before: tuple[int, int]
    dilation: tuple[int, int]


@per_call
def inverted_residual(
    expand_bounds, geometry: DepthwiseGeometry, bounds, x, expand, expand_bias, weight, bias, project, project_bias, out
) -> None:
    """``out = project @ clamp(depthwise(clamp(expand @ x + expand_bias)) + bias) + project_bias``
    for (N, Cin, H, W) ``x``, (C, Cin, 1, 1) ``expand``, (C, 1, kh, kw) ``weight`` and
    (Cout, C, 1, 1) ``project``, all of one float dtype; ``expand_bounds`` / ``bounds`` are the
    clamps' (low, high), None for no clamp. ``out`` may overlap ``x`` (read first) but no
    weight or bias."""
    n, cin, h, w = x.shape
    c, (oh, ow) = weight.shape[0], out.shape[2:]
    dtype = out.dtype
    with_ones = expand_bias is not None
    columns = scratch((n, h * w, cin + with_ones), dtype)
    expanded = scratch((1, h, w, c), dtype)
    total = scratch((1, oh, ow, c), dtype)
    matrix = derived(_expansion_matrix, (expand, expand_bias))
    projection = project.reshape(project.shape[0], c)
    np.copyto(columns[:, :, :cin], x.reshape(n, cin, h * w).transpose(0, 2, 1))  # all of x before out is written
    if with_ones:
        columns[:, :, cin] = 1
    for image in range(n):
        np.matmul(columns[image], matrix, out=expanded.reshape(h * w, c))
        if expand_bounds is not None:
            clamp_by_numbers(expanded, expand_bounds[0], expand_bounds[1], expanded)
        sum_taps_channels_last(expanded, weight, geometry.stride, geometry.before, geometry.dilation, total)
        if bias is not None:
            total += bias
        if bounds is not None:
            clamp_by_numbers(total, bounds[0], bounds[1], total)
        result = out[image].reshape(-1, oh * ow)
        np.matmul(projection, total.reshape(oh * ow, c).T, out=result)
        if project_bias is not None:
            result += project_bias[:, None]


def _expansion_matrix(expand, bias):
    """The (Cin [+ 1], C) matrix of a 1x1 expansion, its bias (if any) the last row."""
    kernels = (
        expand.reshape(1, expand.shape[0], -1) if bias is None else bias_column_weights(expand, bias, 1, expand.dtype)
    )
    return np.ascontiguousarray(kernels[0].T)
