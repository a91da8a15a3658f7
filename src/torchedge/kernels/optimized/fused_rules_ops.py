"""Kernels of the fused operators only load-time fusion calls (`torchedge.fusion.rules`): no
program names them, so they have no torch definition. The max pooling and copy kernels give the
bits of the steps their rules replace; the inverted residual kernel may sum in another order
(its rule is of level ``all``, with the bound its docstring states).

* ``max_pool_values.out``: ``max_pool{dims}d_with_indices`` without the indices nothing reads;
* ``inverted_residual.out``: MobileNetV2's block (a 1x1 expansion, a depthwise convolution, a
  1x1 projection and their clamps) in one pass over the expanded channels, channels-last;
* ``strided_copy.out``: a chain of copies as one copy of a strided view of its input (size and
  strides in elements over the input's contiguous elements).
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.optimized.inverted_residual import DepthwiseGeometry
from torchedge.kernels.optimized.inverted_residual import inverted_residual as _inverted_residual
from torchedge.kernels.optimized.pooling import max_pool_values as _max_pool_values
from torchedge.kernels.portable.common import check, fail
from torchedge.kernels.portable.pooling_geometry import check_input, pool_geometry
from torchedge.kernels.registry import register_kernel

__all__ = ["inverted_residual", "max_pool_values", "strided_copy"]

_MAX_POOL = "torchedge_fused::max_pool_values.out"
_STRIDED_COPY = "torchedge_fused::strided_copy.out"
_INVERTED_RESIDUAL = "torchedge_fused::inverted_residual.out"


def _max_pool_values_shape(op: str, self, kernel_size, stride, padding, dilation, ceil_mode, dims, out) -> list:
    check(dims in (2, 3), op, f"dims must be 2 or 3, got {dims}")
    check_input(op, dims, self)
    *_, size = pool_geometry(op, self, dims, kernel_size, stride, padding, dilation, ceil_mode)
    return [self.shape[:-dims] + size]


@register_kernel(_MAX_POOL, shape=_max_pool_values_shape)
def max_pool_values(self, kernel_size, stride, padding, dilation, ceil_mode, dims, out):
    """The values of ``max_pool{dims}d_with_indices`` (the optimized kernel without indices)."""
    _max_pool_values(_MAX_POOL, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out)


def _strided_copy_shape(op: str, self, size, stride, out) -> list:
    check(
        len(size) == len(stride) and min(size, default=1) >= 0 and min(stride, default=0) >= 0,
        op,
        f"size {list(size)} and stride {list(stride)} must be non-negative and of one length",
    )
    check(self.flags.c_contiguous, op, "the input must be contiguous")
    last = sum((n - 1) * s for n, s in zip(size, stride))
    check(
        math.prod(size) == 0 or last < self.size,
        op,
        f"size {list(size)} and stride {list(stride)} reach element {last}, past the input's {self.size}",
    )
    return [tuple(size)]


@register_kernel(_STRIDED_COPY, shape=_strided_copy_shape)
def strided_copy(self, size, stride, out):
    """``out`` = the (size, stride) view of ``self``'s elements."""
    try:  # (NumPy checks that the view stays within self's contiguous elements)
        view = np.ndarray(tuple(size), self.dtype, self, 0, tuple(s * self.itemsize for s in stride))
    except (TypeError, ValueError) as error:
        fail(_STRIDED_COPY, f"size {list(size)} and stride {list(stride)} do not view the input: {error}")
    np.copyto(out.reshape(view.shape), view)


def _inverted_residual_shape(
    op: str,
    input,
    expand_weight,
    expand_bias,
    depthwise_weight,
    depthwise_bias,
    project_weight,
    project_bias,
    expand_bounds,
    stride,
    padding,
    padding_after,
    dilation,
    depthwise_bounds,
    out,
) -> list:
    weights = (expand_weight, depthwise_weight, project_weight)
    check(
        input.ndim == 4 and all(w.ndim == 4 for w in weights),
        op,
        f"expects a 4-D input and 4-D weights, got {[list(t.shape) for t in (input, *weights)]}",
    )
    channels = expand_weight.shape[0]
    check(
        expand_weight.shape[1:] == (input.shape[1], 1, 1)
        and depthwise_weight.shape[:2] == (channels, 1)
        and project_weight.shape[1:] == (channels, 1, 1),
        op,
        f"weights {[list(w.shape) for w in weights]} are not a 1x1 expansion of {input.shape[1]} channels, "
        "a depthwise convolution and a 1x1 projection",
    )
    size = tuple(
        (n + b + a - d * (k - 1) - 1) // s + 1
        for n, k, s, b, a, d in zip(
            input.shape[2:], depthwise_weight.shape[2:], stride, padding, padding_after, dilation
        )
    )
    check(len(size) == 2 and min(size) > 0, op, f"the depthwise convolution gives an output of size {list(size)}")
    return [(input.shape[0], project_weight.shape[0], *size)]


@register_kernel(_INVERTED_RESIDUAL, shape=_inverted_residual_shape)
def inverted_residual(
    input,
    expand_weight,
    expand_bias,
    depthwise_weight,
    depthwise_bias,
    project_weight,
    project_bias,
    expand_bounds,
    stride,
    padding,
    padding_after,
    dilation,
    depthwise_bounds,
    out,
):
    """MobileNetV2's block (`torchedge.kernels.optimized.inverted_residual`); ``padding`` and
    ``padding_after``: the depthwise convolution's zeros before and after each spatial dim;
    the bounds: each clamp's (low, high) (None: no bound), None for no clamp."""
    arrays = (input, expand_weight, expand_bias, depthwise_weight, depthwise_bias, project_weight, project_bias)
    geometry = (expand_bounds, stride, padding, padding_after, dilation, depthwise_bounds)
    (shape,) = _inverted_residual_shape(_INVERTED_RESIDUAL, *arrays, *geometry, out)
    check(out.shape == shape, _INVERTED_RESIDUAL, f"out has shape {list(out.shape)}, expected {list(shape)}")
    depthwise = DepthwiseGeometry(tuple(stride), tuple(padding), tuple(dilation))
    _inverted_residual(expand_bounds, depthwise, depthwise_bounds, *arrays, out)
