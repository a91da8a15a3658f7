"""Resampling: upsampling of the trailing 1-3 dims, and grid_sampler_2d."""

from __future__ import annotations

from torchedge.kernels.shapes.common import check
from torchedge.kernels.shapes.registry import register_named

__all__ = ["resized", "upsample", "upsample_vec", "grid_sampler_2d"]

# op names by number of resized dims; the ``.out`` overloads take an output size (their
# scales only set the sampling), the ``.vec_out`` ones an output size or scale factors.
_UPSAMPLE = {
    1: ("aten::upsample_nearest1d.out", "aten::upsample_linear1d.out"),
    2: ("aten::upsample_nearest2d.out", "aten::_upsample_nearest_exact2d.out", "aten::upsample_bilinear2d.out",
        "aten::upsample_bicubic2d.out"),
    3: ("aten::upsample_nearest3d.out", "aten::upsample_trilinear3d.out"),
}
_UPSAMPLE_VEC = ("aten::upsample_nearest2d.vec_out", "aten::upsample_bilinear2d.vec_out")


def resized(op: str, dims: int, x, size) -> tuple:
    """``x``'s shape with its last ``dims`` dims set to ``size``."""
    check(x.ndim >= dims + 1, op, f"expected at least a {dims + 1}-D input, got shape {list(x.shape)}")
    check(len(size) == dims and min(size) > 0 and min(x.shape[-dims:]) > 0, op,
          f"cannot resize {list(x.shape)} to {list(size)}")
    return x.shape[:-dims] + tuple(size)


def upsample(op: str, dims: int, self, output_size, *rest) -> list[tuple]:
    return [resized(op, dims, self, output_size)]


def upsample_vec(op: str, dims: int, input, output_size, *rest) -> list[tuple]:
    """Without an output size, each dim is ``int(size * scale)`` (ATen truncates the double)."""
    if output_size is None:
        scale_factors = rest[-2]  # the argument before out
        check(scale_factors is not None and len(scale_factors) == dims, op,
              f"expected an output_size or {dims} scale factors, got {scale_factors}")
        output_size = [int(n * s) for n, s in zip(input.shape[-dims:], scale_factors)]
    return [resized(op, dims, input, output_size)]


for _dims, _names in _UPSAMPLE.items():
    register_named(*_names, bind=(_dims,))(upsample)
register_named(*_UPSAMPLE_VEC, bind=(2,))(upsample_vec)


@register_named("aten::grid_sampler_2d.out")
def grid_sampler_2d(op: str, input, grid, interpolation_mode, padding_mode, align_corners, out) -> list[tuple]:
    """(N, C, H, W) sampled at an (N, Ho, Wo, 2) grid: (N, C, Ho, Wo)."""
    check(input.ndim == 4 and grid.ndim == 4 and grid.shape[-1] == 2 and grid.shape[0] == input.shape[0], op,
          f"expected a 4-D input and an (N, H, W, 2) grid, got shapes {list(input.shape)} and {list(grid.shape)}")
    return [input.shape[:2] + grid.shape[1:3]]
