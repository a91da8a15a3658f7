"""``grid_sampler_2d``: sample an (N, C, H, W) input at the (N, Ho, Wo, 2) grid's points.

Grid coordinates run from -1 to 1 across the input (pixel centres with ``align_corners``
false, corner pixels' centres with it true) and are mapped to pixel coordinates as in
ATen's ``GridSampler.h``: unnormalise, then clip (border) or mirror and clip (reflection).
Bilinear and bicubic interpolation weight their neighbours; neighbours outside the input
count as zero (for bicubic, after the padding mode maps them). Nearest rounds half to even.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.portable.upsample import cubic_weights
from torchedge.kernels.registry import register_kernel

__all__ = ["grid_sampler_2d", "source_coordinates"]

_OP = "aten::grid_sampler_2d.out"
_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord, twice_low, twice_high):
    """Mirror ``coord`` into [twice_low / 2, twice_high / 2] (ATen's ``reflect_coordinates``)."""
    if twice_low == twice_high:
        return np.zeros_like(coord)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    coord = np.abs(coord - low)
    extra = np.fmod(coord, span)
    flips = np.floor(coord / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low)


def _pad(coord, size, padding_mode, align_corners):
    """Border clips to the input; reflection mirrors at its edges, then clips. Clipping
    sends nan to 0, as ATen's vectorised max does."""
    if padding_mode == _REFLECTION:
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
    if padding_mode in (_BORDER, _REFLECTION):
        return np.fmin(np.fmax(coord, 0), size - 1)
    return coord


def source_coordinates(coord, size, padding_mode, align_corners):
    """Pixel coordinate of each normalised grid coordinate along a dim of ``size`` pixels."""
    return _pad(_unnormalize(coord, size, align_corners), size, padding_mode, align_corners)


class _Gather:
    """Values of the (N, C, H, W) input at integer pixel positions (N, P), as (N, C, P),
    and whether each position lies inside (outside positions read pixel 0)."""

    def __init__(self, x):
        n, c, self.h, self.w = x.shape
        self.flat = x.reshape(n, c, -1)

    def __call__(self, ys, xs):
        inside = (ys >= 0) & (ys < self.h) & (xs >= 0) & (xs < self.w)
        index = np.where(inside, ys * self.w + xs, 0)
        values = np.stack([plane.take(where, axis=1) for plane, where in zip(self.flat, index)])
        return values, inside


def _grid_sampler_2d_shape(op: str, input, grid, interpolation_mode, padding_mode, align_corners, out) -> list[tuple]:
    """(N, C, H, W) sampled at an (N, Ho, Wo, 2) grid: (N, C, Ho, Wo)."""
    check(
        input.ndim == 4 and grid.ndim == 4 and grid.shape[-1] == 2 and grid.shape[0] == input.shape[0],
        op,
        f"expected a 4-D input and an (N, H, W, 2) grid, got shapes {list(input.shape)} and {list(grid.shape)}",
    )
    return [input.shape[:2] + grid.shape[1:3]]


@register_kernel("aten::grid_sampler_2d.out", shape=_grid_sampler_2d_shape)
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners, out):
    check(
        input.ndim == 4 and grid.ndim == 4 and grid.shape[-1] == 2 and grid.shape[0] == input.shape[0],
        _OP,
        f"expected a 4-D input and an (N, H, W, 2) grid, got shapes {list(input.shape)} and {list(grid.shape)}",
    )
    check(
        interpolation_mode in (0, 1, 2) and padding_mode in (0, 1, 2),
        _OP,
        f"unknown interpolation mode {interpolation_mode} or padding mode {padding_mode}",
    )
    check(category(input.dtype) >= 2, _OP, f"grid sampling is not implemented for {input.dtype}")
    n, c, h, w = input.shape
    check(
        out.shape == (n, c) + grid.shape[1:3],
        _OP,
        f"out has shape {list(out.shape)}, expected {[n, c, *grid.shape[1:3]]}",
    )
    acc = accumulate_dtype(input.dtype)
    gather = _Gather(input.astype(acc, copy=False))
    points = grid.reshape(n, -1, 2).astype(acc, copy=False)
    with quiet():
        if interpolation_mode == _BICUBIC:
            ix = _unnormalize(points[..., 0], w, align_corners)
            iy = _unnormalize(points[..., 1], h, align_corners)
            result = _bicubic(gather, ix, iy, padding_mode, align_corners, acc)
        else:
            ix = source_coordinates(points[..., 0], w, padding_mode, align_corners)
            iy = source_coordinates(points[..., 1], h, padding_mode, align_corners)
            result = _nearest(gather, ix, iy) if interpolation_mode == _NEAREST else _bilinear(gather, ix, iy)
    write(out, result.reshape(out.shape))


def _nearest(gather, ix, iy):
    values, inside = gather(_to_int(np.rint(iy)), _to_int(np.rint(ix)))
    return values * inside[:, None]


def _to_int(coord):
    """Integer pixel positions; nan and huge coordinates land far outside (so count as 0)."""
    return np.nan_to_num(np.clip(coord, -(2.0**40), 2.0**40), nan=-(2.0**40)).astype(np.int64)


def _bilinear(gather, ix, iy):
    x0, y0 = np.floor(ix), np.floor(iy)
    tx, ty = ix - x0, iy - y0
    x0, y0 = _to_int(x0), _to_int(y0)
    total = None
    for ys, xs, weight in (
        (y0, x0, (1 - tx) * (1 - ty)),
        (y0, x0 + 1, tx * (1 - ty)),
        (y0 + 1, x0, (1 - tx) * ty),
        (y0 + 1, x0 + 1, tx * ty),
    ):
        values, inside = gather(ys, xs)
        values *= (weight * inside)[:, None]
        total = values if total is None else total + values
    return total


def _bicubic(gather, ix, iy, padding_mode, align_corners, acc):
    """4x4 neighbours with cubic convolution weights (A = -0.75); each neighbour's position
    goes through the padding mode before it is read."""
    x0, y0 = np.floor(ix), np.floor(iy)
    wx, wy = cubic_weights((ix - x0).astype(acc)), cubic_weights((iy - y0).astype(acc))
    total = None
    for i in range(4):
        ys = _to_int(_pad(y0 - 1 + i, gather.h, padding_mode, align_corners))
        row = None
        for j in range(4):
            xs = _to_int(_pad(x0 - 1 + j, gather.w, padding_mode, align_corners))
            values, inside = gather(ys, xs)
            term = values * (wx[j] * inside)[:, None]
            row = term if row is None else row + term
        row *= wy[i][:, None]
        total = row if total is None else total + row
    return total
