"""``hash_tensor``: a uint64 digest of a tensor's values over some dims.

Mode 0, the only one ATen has, is the xor of the elements' 64-bit patterns: a floating
point value is widened to float64 (a float32 nan keeps its payload, quieted, as a C++ cast
does) and its bits taken; a signed integer is sign-extended to int64, an unsigned one and
a bool zero-extended. An empty dim list reduces every dim.

    >>> import numpy as np
    >>> out = np.empty((), np.uint64)
    >>> hash_tensor(np.array([-1, 5, -7], np.int32), [], False, 0, out)
    >>> int(out)
    3
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import category
from torchedge.kernels.portable.common import check, fail, quiet, wrap_dims, write
from torchedge.kernels.portable.shape_rules import reduced
from torchedge.kernels.registry import register_kernel

__all__ = ["hash_tensor"]

_U64 = np.dtype(np.uint64)
_UNSUPPORTED = {np.dtype(np.uint16), np.dtype(np.uint32), _U64}


def _hash_shape(op: str, self, dim, keepdim, mode, out) -> list[tuple]:
    return [reduced(op, self.shape, dim, keepdim)]


def _bits(op: str, self: np.ndarray) -> np.ndarray:
    """Each element's 64-bit pattern, as ATen's xor reduction reads it."""
    kind = category(self.dtype)
    if kind == 3 or self.dtype in _UNSUPPORTED:
        fail(op, f"not implemented for dtype {self.dtype}")
    if kind == 2:
        with quiet():
            return self.astype(np.float64).view(_U64)
    if self.dtype.kind in "bu":
        return self.astype(_U64)
    return self.astype(np.int64).view(_U64)


@register_kernel("aten::hash_tensor.out", shape=_hash_shape)
def hash_tensor(self, dim, keepdim, mode, out):
    op = "aten::hash_tensor.out"
    check(mode == 0, op, f"unknown hash_tensor mode: {mode} (only mode 0, the xor of the element bits, exists)")
    check(out.dtype == _U64, op, f"expected result to be of dtype uint64, but got {out.dtype}")
    check(
        len(dim) > 0 or self.size > 0,
        op,
        "an empty input needs its reduction dim: pass the dims to reduce with the 'dim' argument",
    )
    axes = wrap_dims(dim, self.ndim, op)
    for axis in axes:
        check(self.shape[axis] > 0, op, f"expected reduction dim {axis} to have non-zero size")
    bits = _bits(op, self)
    if not axes:  # a 0-dim tensor: its own bits
        write(out, bits.reshape(out.shape))
        return
    write(out, np.bitwise_xor.reduce(bits, axis=axes, keepdims=keepdim))
