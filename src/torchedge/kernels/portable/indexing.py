"""Gathers and masked writes: index, index_select, gather, embedding, masked_fill, tril."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL
from torchedge.kernels.portable.common import check, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["index", "index_select", "gather", "embedding", "masked_fill", "tril"]


def _check_indices(op: str, index: np.ndarray, size: int, negative_ok: bool = False) -> None:
    if index.size:
        low, high = int(index.min()), int(index.max())
        check((-size if negative_ok else 0) <= low and high < size, op,
              f"index {low if low < 0 else high} is out of bounds for dimension of size {size}")


@register_kernel("aten::index.Tensor_out")
def index(self, indices, out):
    """Advanced indexing: NumPy's rules are ATen's (None keeps a dim, bool masks select
    their nonzero positions, index tensors broadcast, and separated index tensors move
    their dims to the front)."""
    op = "aten::index.Tensor_out"
    check(len(indices) <= self.ndim, op, f"too many indices ({len(indices)}) for a tensor of {self.ndim} dims")
    key = []
    for axis, idx in enumerate(indices):
        if idx is None:
            key.append(slice(None))
        elif idx.dtype == np.uint8 or idx.dtype == BOOL:  # a uint8 index is a (legacy) mask
            key.append(idx.astype(BOOL, copy=False))
        else:
            _check_indices(op, idx, self.shape[axis], negative_ok=True)
            key.append(idx)
    write(out, self[tuple(key)])


@register_kernel("aten::index_select.out")
def index_select(self, dim, index, out):
    op = "aten::index_select.out"
    axis = wrap_dim(dim, self.ndim, op)
    if self.ndim == 0:
        _check_indices(op, index, 1)
        write(out, self)
        return
    _check_indices(op, index, self.shape[axis])
    write(out, np.take(self, index.reshape(-1), axis=axis))


@register_kernel("aten::gather.out")
def gather(self, dim, index, sparse_grad, out):
    """out[i][j][k] = self[index[i][j][k]][j][k] (for dim 0); index may be smaller than
    self in the other dims."""
    op = "aten::gather.out"
    if self.ndim == 0:  # ATen treats 0-dim tensors as 1-dim here
        self = self.reshape(1)
    if index.ndim == 0:
        index, out = index.reshape(1), out.reshape(1)
    axis = wrap_dim(dim, self.ndim, op)
    check(index.ndim == self.ndim, op, f"index has {index.ndim} dims, self has {self.ndim}")
    check(all(i <= s for d, (i, s) in enumerate(zip(index.shape, self.shape)) if d != axis), op,
          f"index shape {list(index.shape)} exceeds self shape {list(self.shape)} outside dim {dim}")
    _check_indices(op, index, self.shape[axis])
    window = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index.shape))
    write(out, np.take_along_axis(self[window], index.astype(np.intp, copy=False), axis=axis))


@register_kernel("aten::embedding.out")
def embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse, out):
    op = "aten::embedding.out"
    check(weight.ndim == 2, op, f"weight must be 2-D, got shape {list(weight.shape)}")
    _check_indices(op, indices, weight.shape[0])
    if out.dtype == weight.dtype:
        np.take(weight, indices, axis=0, out=out)
    else:
        write(out, np.take(weight, indices, axis=0))


@register_kernel("aten::masked_fill.Scalar_out")
def masked_fill(self, mask, value, out):
    write(out, self)
    np.copyto(out, value, casting="unsafe", where=mask.astype(BOOL, copy=False))


@register_kernel("aten::tril.out")
def tril(self, diagonal, out):
    """Zero the entries above the ``diagonal``-th diagonal of the last two dims."""
    check(self.ndim >= 2, "aten::tril.out", f"expects at least 2 dims, got shape {list(self.shape)}")
    write(out, self)
    above = ~np.tri(*self.shape[-2:], k=diagonal, dtype=BOOL)
    np.copyto(out, 0, casting="unsafe", where=above)
