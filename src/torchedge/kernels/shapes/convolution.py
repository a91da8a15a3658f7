"""Convolution (1-3 spatial dims, grouped, transposed), its backward, im2col and col2im."""

from __future__ import annotations

import math

from torchedge.kernels.portable.common import pair
from torchedge.kernels.portable.windows import output_size
from torchedge.kernels.shapes.common import check, masked
from torchedge.kernels.shapes.registry import register_named

__all__ = ["convolution", "convolution_backward", "im2col", "col2im"]


def _spatial_dims(op: str, input, weight) -> int:
    """How many spatial dims the weight convolves; the input may lack the batch dim."""
    spatial = weight.ndim - 2
    check(1 <= spatial <= 3, op, f"expected a 3-D to 5-D weight, got shape {list(weight.shape)}")
    check(input.ndim in (spatial + 1, spatial + 2), op,
          f"expected a {spatial + 2}-D (batched) or {spatial + 1}-D input, got shape {list(input.shape)}")
    return spatial


def _check_groups(op: str, ok: bool, channels: int, weight, groups: int) -> None:
    check(ok, op, f"input channels ({channels}) and weight shape {list(weight.shape)} do not match groups={groups}")


def _forward(op, channels, sizes, weight, stride, padding, dilation, groups) -> tuple:
    """(O, S') of a convolution by an (O, C/G, *k) weight."""
    _check_groups(op, channels == weight.shape[1] * groups and weight.shape[0] % groups == 0, channels, weight, groups)
    size = tuple(output_size(*args) for args in zip(sizes, weight.shape[2:], stride, padding, dilation))
    return weight.shape[0], size


def _transposed(op, channels, sizes, weight, stride, padding, dilation, output_padding, groups) -> tuple:
    """(O, S') of a transposed convolution by a (C, O/G, *k) weight."""
    _check_groups(op, weight.shape[0] == channels and channels % groups == 0, channels, weight, groups)
    check(all(o < s or o < d for o, s, d in zip(output_padding, stride, dilation)), op,
          f"output_padding {list(output_padding)} must be smaller than either stride or dilation")
    return weight.shape[1] * groups, tuple((i - 1) * s - 2 * p + d * (k - 1) + o + 1 for i, k, s, p, d, o in
                                           zip(sizes, weight.shape[2:], stride, padding, dilation, output_padding))


@register_named("aten::convolution.out")
def convolution(op: str, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                out) -> list[tuple]:
    """(N, C, *S) by (O, C/G, *k) gives (N, O, *S'); transposed, (C, O/G, *k) gives (N, O, *S')."""
    spatial = _spatial_dims(op, input, weight)
    stride, padding, dilation = (pair(v, spatial, name, op) for v, name in
                                 ((stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    check(min(stride) > 0 and min(dilation) > 0 and min(padding) >= 0 and groups >= 1, op,
          f"stride {list(stride)}, dilation {list(dilation)} and groups {groups} must be positive, "
          f"padding {list(padding)} non-negative")
    channels, sizes = input.shape[-spatial - 1], input.shape[-spatial:]
    if transposed:
        output_padding = pair(output_padding, spatial, "output_padding", op)
        out_channels, size = _transposed(op, channels, sizes, weight, stride, padding, dilation, output_padding,
                                         groups)
    else:
        out_channels, size = _forward(op, channels, sizes, weight, stride, padding, dilation, groups)
    check(min(size) > 0, op, f"the output size {list(size)} is too small (input shape {list(input.shape)}, "
                             f"weight shape {list(weight.shape)})")
    return [input.shape[:-spatial - 1] + (out_channels,) + size]


@register_named("aten::convolution_backward.out")
def convolution_backward(op: str, grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask, out0, out1, out2) -> list[tuple]:
    """Gradients shaped like the input, the weight and the bias (one per output channel)."""
    spatial = _spatial_dims(op, input, weight)
    check(grad_output.ndim == input.ndim, op, f"grad_output shape {list(grad_output.shape)} does not match input "
                                              f"shape {list(input.shape)}")
    return masked(output_mask, [input.shape, weight.shape, (grad_output.shape[-spatial - 1],)])


def _fold_geometry(op: str, kernel_size, dilation, padding, stride) -> tuple:
    return tuple(pair(v, 2, name, op) for v, name in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                                      (padding, "padding"), (stride, "stride")))


def _blocks(op: str, size, kernel, dilation, padding, stride) -> tuple:
    """The grid of sliding blocks over a (H, W) plane."""
    grid = tuple(output_size(*args) for args in zip(size, kernel, stride, padding, dilation))
    check(min(grid) > 0, op, f"the kernel {list(kernel)} does not fit the padded plane {list(size)}")
    return grid


@register_named("aten::im2col.out")
def im2col(op: str, self, kernel_size, dilation, padding, stride, out) -> list[tuple]:
    """(N, C, H, W) -> (N, C*kh*kw, L) with L blocks (``nn.Unfold``); N is optional."""
    check(self.ndim in (3, 4), op, f"expected a 3-D or 4-D input, got shape {list(self.shape)}")
    kernel, dilation, padding, stride = _fold_geometry(op, kernel_size, dilation, padding, stride)
    grid = _blocks(op, self.shape[-2:], kernel, dilation, padding, stride)
    return [self.shape[:-3] + (self.shape[-3] * math.prod(kernel), math.prod(grid))]


@register_named("aten::col2im.out")
def col2im(op: str, self, output_size, kernel_size, dilation, padding, stride, out) -> list[tuple]:
    """(N, C*kh*kw, L) -> (N, C, *output_size) (``nn.Fold``); N is optional."""
    check(self.ndim in (2, 3), op, f"expected a 2-D or 3-D input, got shape {list(self.shape)}")
    kernel, dilation, padding, stride = _fold_geometry(op, kernel_size, dilation, padding, stride)
    size = pair(output_size, 2, "output_size", op)
    grid = _blocks(op, size, kernel, dilation, padding, stride)
    taps = math.prod(kernel)
    check(self.shape[-2] % taps == 0 and self.shape[-1] == math.prod(grid), op,
          f"input shape {list(self.shape)} does not match kernel_size {list(kernel)} and output_size {list(size)}")
    return [self.shape[:-2] + (self.shape[-2] // taps,) + size]
