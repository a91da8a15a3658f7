"""Complex numbers: conjugates, building a complex tensor from parts (``complex``, ``polar``)
and the copies of ``view_as_real`` / ``view_as_complex``.

A complex tensor is a NumPy complex64 or complex128 array (ExecuTorch's COMPLEX64/COMPLEX128);
its parts are float32 or float64. ATen's complex32 has no NumPy dtype and is not supported.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, write
from torchedge.kernels.portable.shape_rules import broadcast_inputs, same_as
from torchedge.kernels.registry import register_kernel

__all__ = ["conj_copy", "conj_physical", "complex_", "polar", "view_as_real_copy", "view_as_complex_copy"]

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}


def _conjugate(self, out) -> None:
    """The complex conjugate; a real tensor is its own conjugate (ATen copies it)."""
    if self.dtype.kind == "c":
        np.conjugate(self, out=out)
    else:
        write(out, self)


@register_kernel("aten::_conj_copy.out", shape=same_as(), inplace_safe=True)
def conj_copy(self, out):
    _conjugate(self, out)


@register_kernel("aten::_conj_physical.out", "aten::conj_physical.out", shape=same_as(), inplace_safe=True)
def conj_physical(self, out):
    _conjugate(self, out)


def _parts(op: str, first: str, a, second: str, b, out) -> None:
    """ATen's checks of two real parts: the same float32 or float64 dtype, and out its complex twin."""
    check(a.dtype == b.dtype, op, f"expected {first} and {second} to have the same dtype, got {a.dtype} and {b.dtype}")
    check(a.dtype in _COMPLEX_OF, op, f"expected {first} and {second} of dtype float32 or float64, got {a.dtype}")
    complex_dtype = _COMPLEX_OF[a.dtype]
    check(out.dtype == complex_dtype, op, f"expected out to have dtype {complex_dtype}, got {out.dtype}")


@register_kernel("aten::complex.out", shape=broadcast_inputs)
def complex_(real, imag, out):
    """``real + i imag``, the parts broadcast."""
    _parts("aten::complex.out", "real", real, "imag", imag, out)
    out.real[...] = real
    out.imag[...] = imag


@register_kernel("aten::polar.out", shape=broadcast_inputs)
def polar(magnitude, angle, out):
    """``abs * (cos(angle) + i sin(angle))``, computed in the parts' dtype."""
    _parts("aten::polar.out", "abs", magnitude, "angle", angle, out)
    out.real[...] = magnitude * np.cos(angle)
    out.imag[...] = magnitude * np.sin(angle)


def _view_as_real_shape(op: str, self, out) -> list[tuple]:
    check(self.dtype.kind == "c", op, f"view_as_real is only supported for complex tensors, got {self.dtype}")
    return [(*self.shape, 2)]


@register_kernel("aten::view_as_real_copy.out", shape=_view_as_real_shape)
def view_as_real_copy(self, out):
    """The parts of each complex number along a new last dim of size 2 (real, imaginary)."""
    _view_as_real_shape("aten::view_as_real_copy.out", self, out)
    out[..., 0] = self.real
    out[..., 1] = self.imag


def _view_as_complex_shape(op: str, self, out) -> list[tuple]:
    check(
        self.dtype in _COMPLEX_OF,
        op,
        f"view_as_complex is only supported for float32 and float64 tensors, got {self.dtype}",
    )
    check(self.ndim > 0 and self.shape[-1] == 2, op, f"tensor must have a last dimension of size 2, got {self.shape}")
    return [self.shape[:-1]]


@register_kernel("aten::view_as_complex_copy.out", shape=_view_as_complex_shape)
def view_as_complex_copy(self, out):
    """Pairs along the last dim (of size 2) read as (real, imaginary) parts."""
    _view_as_complex_shape("aten::view_as_complex_copy.out", self, out)
    out.real[...] = self[..., 0]
    out.imag[...] = self[..., 1]
