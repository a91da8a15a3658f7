"""``aten::im2col`` and ``aten::col2im`` (``nn.Unfold`` / ``nn.Fold``): the sliding blocks of a
(N, C, H, W) plane as columns, and the columns summed back into their blocks."""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype
from torchedge.kernels.portable import windows
from torchedge.kernels.portable.common import fail, pair, quiet, write
from torchedge.kernels.portable.convolution import im2col
from torchedge.kernels.portable.windows import scatter_taps
from torchedge.kernels.registry import register_kernel

__all__ = ["im2col_out", "col2im"]


def _fold_geometry(op, kernel_size, dilation, padding, stride):
    return tuple(
        pair(v, 2, name, op)
        for v, name in ((kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"), (stride, "stride"))
    )


def _blocks(op: str, size, kernel, dilation, padding, stride) -> tuple:
    """The grid of sliding blocks over a (H, W) plane."""
    grid = tuple(windows.output_size(*args) for args in zip(size, kernel, stride, padding, dilation))
    if min(grid) <= 0:
        fail(op, f"the kernel {list(kernel)} does not fit the padded plane {list(size)}")
    return grid


def _unfold_geometry(op: str, self, kernel_size, dilation, padding, stride) -> tuple:
    """im2col's checks: (kernel, dilation, padding, stride, grid of blocks)."""
    if self.ndim not in (3, 4):
        fail(op, f"expected a 3-D or 4-D input, got shape {list(self.shape)}")
    kernel, dilation, padding, stride = _fold_geometry(op, kernel_size, dilation, padding, stride)
    return kernel, dilation, padding, stride, _blocks(op, self.shape[-2:], kernel, dilation, padding, stride)


def _fold_sizes(op: str, self, output_size, kernel_size, dilation, padding, stride) -> tuple:
    """col2im's checks: (kernel, dilation, padding, stride, output (H, W), grid of blocks)."""
    if self.ndim not in (2, 3):
        fail(op, f"expected a 2-D or 3-D input, got shape {list(self.shape)}")
    kernel, dilation, padding, stride = _fold_geometry(op, kernel_size, dilation, padding, stride)
    size = pair(output_size, 2, "output_size", op)
    grid = _blocks(op, size, kernel, dilation, padding, stride)
    if self.shape[-2] % math.prod(kernel) != 0 or self.shape[-1] != math.prod(grid):
        fail(
            op, f"input shape {list(self.shape)} does not match kernel_size {list(kernel)} and output_size {list(size)}"
        )
    return kernel, dilation, padding, stride, size, grid


def _im2col_shape(op: str, self, kernel_size, dilation, padding, stride, out) -> list[tuple]:
    """(N, C, H, W) -> (N, C*kh*kw, L) with L blocks (``nn.Unfold``); N is optional."""
    kernel, *_, grid = _unfold_geometry(op, self, kernel_size, dilation, padding, stride)
    return [self.shape[:-3] + (self.shape[-3] * math.prod(kernel), math.prod(grid))]


@register_kernel("aten::im2col.out", shape=_im2col_shape)
def im2col_out(self, kernel_size, dilation, padding, stride, out):
    """(N, C, H, W) -> (N, C*kh*kw, L): every sliding block as a column (``nn.Unfold``)."""
    op = "aten::im2col.out"
    kernel, dilation, padding, stride, size = _unfold_geometry(op, self, kernel_size, dilation, padding, stride)
    x = self if self.ndim == 4 else self[None]
    write(out, im2col(x, kernel, stride, padding, dilation, size, x.dtype).reshape(out.shape))


def _col2im_shape(op: str, self, output_size, kernel_size, dilation, padding, stride, out) -> list[tuple]:
    """(N, C*kh*kw, L) -> (N, C, *output_size) (``nn.Fold``); N is optional."""
    kernel, *_, size, _ = _fold_sizes(op, self, output_size, kernel_size, dilation, padding, stride)
    return [self.shape[:-2] + (self.shape[-2] // math.prod(kernel),) + size]


@register_kernel("aten::col2im.out", shape=_col2im_shape)
def col2im(self, output_size, kernel_size, dilation, padding, stride, out):
    """(N, C*kh*kw, L) -> (N, C, H, W): sums every column back into its block (``nn.Fold``)."""
    op = "aten::col2im.out"
    kernel, dilation, padding, stride, out_hw, grid = _fold_sizes(
        op, self, output_size, kernel_size, dilation, padding, stride
    )
    columns = self if self.ndim == 3 else self[None]
    taps = math.prod(kernel)
    n, c = columns.shape[0], columns.shape[1] // taps
    acc = columns.dtype if columns.dtype == np.bool_ else accumulate_dtype(columns.dtype)
    planes = columns.reshape((n * c, taps) + grid)
    with quiet():
        total = scatter_taps(lambda t: planes[:, t], out_hw, kernel, stride, padding, dilation, acc)
    write(out, total.reshape(out.shape))
