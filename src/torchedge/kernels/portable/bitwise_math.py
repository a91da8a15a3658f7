"""Integer bit and number-theory ops: bitwise shifts (``<<``, ``>>``), gcd, lcm, and signbit.

Shifts follow ATen's rules for out-of-range counts: a left shift by a negative count or by
the bit width or more gives 0; a right shift by such a count gives 0 for unsigned types and
the sign (0 or -1) for signed ones. Integers wrap as in C++; gcd and lcm apply ``abs`` in
the tensor's dtype, so the most negative value stays negative, as in ATen.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, category
from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.portable.elementwise import SAME, binary
from torchedge.kernels.portable.shape_rules import broadcast_inputs
from torchedge.kernels.registry import register_kernel

__all__ = ["left_shift", "right_shift", "gcd", "lcm", "signbit"]


def _unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def _shift_counts(b, dtype: np.dtype):
    """The counts as the unsigned type of ``dtype`` (clipped into range) and where they are valid."""
    bits = dtype.itemsize * 8
    b = np.asarray(b, dtype)
    valid = (b >= 0) & (b < bits)
    return np.where(valid, b, 0).astype(_unsigned(dtype)), valid


def _left(a, b, out, dtype):
    counts, valid = _shift_counts(b, dtype)
    shifted = np.left_shift(np.asarray(a, dtype).view(_unsigned(dtype)), counts)
    write(out, np.where(valid, shifted.view(dtype), dtype.type(0)))


def _right(a, b, out, dtype):
    counts, valid = _shift_counts(b, dtype)
    a = np.asarray(a, dtype)
    if dtype.kind == "i":  # an arithmetic shift by bits - 1 leaves the sign
        counts = np.where(valid, counts, counts.dtype.type(dtype.itemsize * 8 - 1))
        write(out, np.right_shift(a, counts.astype(dtype)))
    else:
        write(out, np.where(valid, np.right_shift(a, counts), dtype.type(0)))


def _shift_kernel(op: str, fn):
    def kernel(self, other, out):
        binary(op, fn, SAME, self, other, out, kinds="i")

    kernel.__name__ = op.split("::")[1].split(".")[0].strip("_")
    return kernel


left_shift = register_kernel(
    "aten::bitwise_left_shift.Tensor_out",
    "aten::bitwise_left_shift.Tensor_Scalar_out",
    "aten::bitwise_left_shift.Scalar_Tensor_out",
    "aten::__lshift__.Tensor_out",
    "aten::__lshift__.Scalar_out",
    shape=broadcast_inputs,
)(_shift_kernel("aten::bitwise_left_shift.Tensor_out", _left))
right_shift = register_kernel(
    "aten::bitwise_right_shift.Tensor_out",
    "aten::bitwise_right_shift.Tensor_Scalar_out",
    "aten::bitwise_right_shift.Scalar_Tensor_out",
    "aten::__rshift__.Tensor_out",
    "aten::__rshift__.Scalar_out",
    shape=broadcast_inputs,
)(_shift_kernel("aten::bitwise_right_shift.Tensor_out", _right))


def _euclid(a, b, dtype: np.dtype) -> np.ndarray:
    """Euclid's algorithm on ``abs(a)``, ``abs(b)`` (abs wrapping in ``dtype``), with C's
    truncating remainder; one vectorized step per iteration (at most ~100 for int64)."""
    x, y = np.broadcast_arrays(np.abs(np.asarray(a, dtype)), np.abs(np.asarray(b, dtype)))
    x, y = x.copy(), y.copy()
    while True:
        live = x != 0
        if not live.any():
            return y
        remainder = np.fmod(y, np.where(live, x, dtype.type(1)))
        y = np.where(live, x, y)
        x = np.where(live, remainder, dtype.type(0))


def _gcd(a, b, out, dtype):
    write(out, _euclid(a, b, dtype))


def _lcm(a, b, out, dtype):
    g = _euclid(a, b, dtype)
    # C++ computes a / g * b in int for 8- and 16-bit types (no wrap), in the type itself otherwise
    wide = np.dtype(np.int64) if dtype.itemsize < 4 else dtype
    a, b, g = (np.asarray(v).astype(wide) for v in (a, b, g))
    safe = np.where(g == 0, wide.type(1), g)
    result = np.abs(np.multiply(np.floor_divide(a, safe), b))
    write(out, np.where(g == 0, wide.type(0), result))


@register_kernel("aten::gcd.out", shape=broadcast_inputs)
def gcd(self, other, out):
    binary("aten::gcd.out", _gcd, SAME, self, other, out, kinds="i")


@register_kernel("aten::lcm.out", shape=broadcast_inputs)
def lcm(self, other, out):
    binary("aten::lcm.out", _lcm, SAME, self, other, out, kinds="i")


@register_kernel("aten::signbit.out", shape=broadcast_inputs)
def signbit(self, out):
    """Whether the sign bit is set: -0.0 and a negative nan count; bool is never negative."""
    check(out.dtype == BOOL, "aten::signbit.out", f"does not support non-boolean outputs (got {out.dtype})")
    if self.dtype == BOOL or self.dtype.kind == "u":
        write(out, False)
    elif category(self.dtype) == 1:
        np.less(self, 0, out=out)
    else:
        with quiet():
            np.signbit(self.astype(np.float32) if self.dtype.itemsize == 2 else self, out=out)
