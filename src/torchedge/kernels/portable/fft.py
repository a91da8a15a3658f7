"""Discrete Fourier transforms through ``numpy.fft``: real-to-complex, complex-to-real,
complex-to-complex over any dims.

ATen names the scaling of the transform it computes (none, 1/sqrt(n), 1/n); NumPy names
the direction that carries the 1/n. The tables below translate one into the other.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, fail, wrap_dim, write
from torchedge.kernels.portable.shape_rules import replaced, same_as
from torchedge.kernels.registry import register_kernel

__all__ = ["fft_r2c", "fft_c2r", "fft_c2c"]

# ATen's fft_norm_mode (0: no scaling, 1: 1/sqrt(n), 2: 1/n) as NumPy's norm argument
_FORWARD_NORM = {0: "backward", 1: "ortho", 2: "forward"}
_INVERSE_NORM = {0: "forward", 1: "ortho", 2: "backward"}


def _check_dims(op: str, dim) -> None:
    if len(dim) == 0:
        fail(op, "expected at least one dim to transform")


def _check_complex(op: str, self) -> None:
    if self.dtype.kind != "c":
        fail(op, f"expected a complex input, got {self.dtype}")


def _check_last_dim_size(op: str, last_dim_size) -> None:
    if last_dim_size <= 0:
        fail(op, f"last_dim_size must be positive, got {last_dim_size}")


def _axes(op, x, dim, normalization):
    check(normalization in _FORWARD_NORM, op, f"normalization must be 0, 1 or 2, got {normalization}")
    _check_dims(op, dim)
    axes = [wrap_dim(d, x.ndim, op) for d in dim]
    check(len(set(axes)) == len(axes), op, f"dim {list(dim)} lists a dimension twice")
    return axes


def _last_axis(op: str, self, dim) -> int:
    _check_dims(op, dim)
    return wrap_dim(dim[-1], self.ndim, op)


def _fft_r2c_shape(op: str, self, dim, normalization, onesided, out) -> list[tuple]:
    """One-sided, the last transformed dim keeps its n // 2 + 1 non-negative frequencies."""
    axis = _last_axis(op, self, dim)
    return [replaced(self.shape, axis, self.shape[axis] // 2 + 1) if onesided else self.shape]


@register_kernel("aten::_fft_r2c.out", shape=_fft_r2c_shape)
def fft_r2c(self, dim, normalization, onesided, out):
    """Forward transform of a real tensor; ``onesided`` keeps the last dim's non-negative
    frequencies only (n // 2 + 1 of them)."""
    op = "aten::_fft_r2c.out"
    check(self.dtype.kind == "f", op, f"expected a floating point input, got {self.dtype}")
    axes = _axes(op, self, dim, normalization)
    transform = np.fft.rfftn if onesided else np.fft.fftn
    write(out, transform(self, axes=axes, norm=_FORWARD_NORM[normalization]))


def _fft_c2r_shape(op: str, self, dim, normalization, last_dim_size, out) -> list[tuple]:
    _check_last_dim_size(op, last_dim_size)
    return [replaced(self.shape, _last_axis(op, self, dim), last_dim_size)]


@register_kernel("aten::_fft_c2r.out", shape=_fft_c2r_shape)
def fft_c2r(self, dim, normalization, last_dim_size, out):
    """Inverse transform of a one-sided spectrum to a real tensor whose last transformed
    dim has ``last_dim_size`` elements."""
    op = "aten::_fft_c2r.out"
    _check_complex(op, self)
    axes = _axes(op, self, dim, normalization)
    _check_last_dim_size(op, last_dim_size)
    sizes = [self.shape[a] for a in axes[:-1]] + [last_dim_size]
    write(out, np.fft.irfftn(self, s=sizes, axes=axes, norm=_INVERSE_NORM[normalization]))


@register_kernel("aten::_fft_c2c.out", shape=same_as())
def fft_c2c(self, dim, normalization, forward, out):
    """Forward or inverse complex transform over ``dim`` (an empty list copies)."""
    op = "aten::_fft_c2c.out"
    _check_complex(op, self)
    if len(dim) == 0:
        write(out, self)
        return
    axes = _axes(op, self, dim, normalization)
    if forward:
        write(out, np.fft.fftn(self, axes=axes, norm=_FORWARD_NORM[normalization]))
    else:
        write(out, np.fft.ifftn(self, axes=axes, norm=_INVERSE_NORM[normalization]))
