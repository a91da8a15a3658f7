"""``grid_sampler_3d``: sample an (N, C, D, H, W) input at the (N, Do, Ho, Wo, 3) grid's
points, trilinearly or at the nearest voxel, with zeros, border or reflection padding.

The grid's (x, y, z) run from -1 to 1 across (W, H, D): over voxel centres with
``align_corners`` false, between corner voxels' centres with it true. Coordinates follow
ATen's scalar CPU path: unnormalise; clip (border) or mirror then clip (reflection), where
a NaN coordinate clips to the last voxel; then a NaN, infinite or huge coordinate becomes
-100, far outside. Trilinear weights are products of distances to the opposite corner,
and the eight corners add in ATen's order; corners outside the input count as zero.
Nearest rounds half to even. float32 and float64 only (16-bit floats are refused).
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.registry import register_kernel

__all__ = ["grid_sampler_3d"]

_OP = "aten::grid_sampler_3d.out"
_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2
_INT_MAX, _INT_MIN = 2**31 - 1, -(2**31)


def _clip(coord, size: int):
    """``min(size - 1, max(coord, 0))`` as C++ ``std::min``/``std::max`` order them: a NaN
    survives the max and then loses to ``size - 1`` in the min."""
    high = coord.dtype.type(size - 1)
    coord = np.where(coord < 0, coord.dtype.type(0), coord)
    return np.where(high < coord, high, np.where(np.isnan(coord), high, coord))


def _mirror(coord, twice_low: int, twice_high: int):
    if twice_low == twice_high:
        return np.zeros_like(coord)
    t = coord.dtype.type
    low, span = t(twice_low / 2), t((twice_high - twice_low) / 2)
    coord = np.abs(coord - low)
    extra = np.fmod(coord, span)
    flips = np.floor(coord / span)
    return np.where(np.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _source(coord, size: int, padding_mode: int, align_corners: bool):
    """Voxel coordinate of each normalised grid coordinate along a dim of ``size`` voxels."""
    t = coord.dtype.type
    if align_corners:
        coord = (coord + t(1)) / t(2) * t(size - 1)
    else:
        coord = ((coord + t(1)) * t(size) - t(1)) / t(2)
    if padding_mode == _REFLECTION:
        coord = _mirror(coord, 0, 2 * (size - 1)) if align_corners else _mirror(coord, -1, 2 * size - 1)
    if padding_mode in (_BORDER, _REFLECTION):
        coord = _clip(coord, size)
    bad = ~np.isfinite(coord) | (coord > _INT_MAX - 1) | (coord < _INT_MIN)
    return np.where(bad, t(-100), coord)


class _Volume:
    """Values of the (N, C, D, H, W) input at integer voxels (N, P), as (N, C, P), and
    whether each voxel lies inside."""

    def __init__(self, x: np.ndarray):
        self.d, self.h, self.w = x.shape[2:]
        self.flat = x.reshape(x.shape[0], x.shape[1], -1)

    def __call__(self, zs, ys, xs):
        inside = (zs >= 0) & (zs < self.d) & (ys >= 0) & (ys < self.h) & (xs >= 0) & (xs < self.w)
        index = np.where(inside, (zs * self.h + ys) * self.w + xs, 0)
        values = np.take_along_axis(self.flat, index[:, None, :], axis=2)
        return values, inside


def _check(input, grid, interpolation_mode, padding_mode) -> None:
    check(
        input.ndim == 5 and grid.ndim == 5 and grid.shape[-1] == 3 and grid.shape[0] == input.shape[0],
        _OP,
        f"expected a 5-D input and an (N, D, H, W, 3) grid with the input's batch size, got shapes "
        f"{list(input.shape)} and {list(grid.shape)}",
    )
    check(interpolation_mode != _BICUBIC, _OP, "bicubic interpolation only supports 4D input")
    check(
        interpolation_mode in (_BILINEAR, _NEAREST) and padding_mode in (_ZEROS, _BORDER, _REFLECTION),
        _OP,
        f"unknown interpolation mode {interpolation_mode} or padding mode {padding_mode}",
    )
    check(
        input.dtype in (np.dtype(np.float32), np.dtype(np.float64)),
        _OP,
        f"grid sampling is implemented for float32 and float64 only, got {input.dtype}",
    )
    check(grid.dtype == input.dtype, _OP, f"grid dtype {grid.dtype} must be the input's dtype {input.dtype}")
    check(
        all(s > 0 for s in input.shape[2:]),
        _OP,
        f"expected an input with non-empty spatial dims, got shape {list(input.shape)}",
    )


def _shape(op: str, input, grid, interpolation_mode, padding_mode, align_corners, out) -> list[tuple]:
    check(
        input.ndim == 5 and grid.ndim == 5 and grid.shape[-1] == 3,
        op,
        f"expected a 5-D input and an (N, D, H, W, 3) grid, got shapes {list(input.shape)} and {list(grid.shape)}",
    )
    return [input.shape[:2] + grid.shape[1:4]]


@register_kernel(_OP, shape=_shape)
def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners, out):
    _check(input, grid, interpolation_mode, padding_mode)
    if out.size == 0:
        return
    n = input.shape[0]
    volume = _Volume(input)
    points = grid.reshape(n, -1, 3)
    with quiet():
        ix = _source(points[..., 0], volume.w, padding_mode, align_corners)
        iy = _source(points[..., 1], volume.h, padding_mode, align_corners)
        iz = _source(points[..., 2], volume.d, padding_mode, align_corners)
        result = _nearest(volume, ix, iy, iz) if interpolation_mode == _NEAREST else _trilinear(volume, ix, iy, iz)
    write(out, result.reshape(out.shape))


def _nearest(volume, ix, iy, iz):
    values, inside = volume(*(np.rint(c).astype(np.int64) for c in (iz, iy, ix)))
    return np.where(inside[:, None, :], values, values.dtype.type(0))


def _trilinear(volume, ix, iy, iz):
    x0, y0, z0 = np.floor(ix), np.floor(iy), np.floor(iz)
    one = ix.dtype.type(1)
    x1, y1, z1 = x0 + one, y0 + one, z0 + one
    wx = ((x1 - ix), (ix - x0))  # weight of the west (x0) and east (x1) voxels
    wy = ((y1 - iy), (iy - y0))
    wz = ((z1 - iz), (iz - z0))
    xs = (x0.astype(np.int64), x1.astype(np.int64))
    ys = (y0.astype(np.int64), y1.astype(np.int64))
    zs = (z0.astype(np.int64), z1.astype(np.int64))
    total = np.zeros(volume.flat.shape[:2] + ix.shape[1:], ix.dtype)
    for dz in (0, 1):  # ATen's order: tnw, tne, tsw, tse, bnw, bne, bsw, bse
        for dy in (0, 1):
            for dx in (0, 1):
                weight = wx[dx] * wy[dy] * wz[dz]
                values, inside = volume(zs[dz], ys[dy], xs[dx])
                total += np.where(inside[:, None, :], values * weight[:, None, :], values.dtype.type(0))
    return total
