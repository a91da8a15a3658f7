"""Discrete Fourier transforms that change the last transformed dim's size (complex-to-complex
keeps every size: `same_shape`)."""

from __future__ import annotations

from torchedge.kernels.shapes.common import check, replaced, wrap_dim
from torchedge.kernels.shapes.registry import register_named

__all__ = ["fft_r2c", "fft_c2r"]


def _last_axis(op: str, self, dim) -> int:
    check(len(dim) > 0, op, "expected at least one dim to transform")
    return wrap_dim(dim[-1], self.ndim, op)


@register_named("aten::_fft_r2c.out")
def fft_r2c(op: str, self, dim, normalization, onesided, out) -> list[tuple]:
    """One-sided, the last transformed dim keeps its n // 2 + 1 non-negative frequencies."""
    axis = _last_axis(op, self, dim)
    return [replaced(self.shape, axis, self.shape[axis] // 2 + 1) if onesided else self.shape]


@register_named("aten::_fft_c2r.out")
def fft_c2r(op: str, self, dim, normalization, last_dim_size, out) -> list[tuple]:
    check(last_dim_size > 0, op, f"last_dim_size must be positive, got {last_dim_size}")
    return [replaced(self.shape, _last_axis(op, self, dim), last_dim_size)]
