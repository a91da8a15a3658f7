"""Gathers: advanced indexing, index_select, gather, embedding (bag) and its backward."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.shapes.common import broadcast_shapes, check, replaced, wrap_dim
from torchedge.kernels.shapes.registry import register_named

__all__ = ["index_shape", "index", "index_select", "gather", "embedding", "embedding_dense_backward", "embedding_bag"]


def _is_mask(index: np.ndarray) -> bool:
    return index.dtype == np.bool_ or index.dtype == np.uint8  # a uint8 index is a (legacy) mask


def index_shape(op: str, shape: tuple, indices) -> tuple:
    """The shape of ATen's (and NumPy's) advanced indexing ``self[indices]``.

    None keeps a dim; index tensors broadcast together, and their shape replaces the dims
    they index: where the first of them stood when they are adjacent, in front otherwise.
    A mask over k dims acts as one index of its number of true values: the only place a
    shape function reads data, since that count is the output size.
    """
    check(len(indices) <= len(shape), op, f"too many indices ({len(indices)}) for a tensor of {len(shape)} dims")
    before, after, indexed = [], [], []  # kept dims before / after the first index tensor, index shapes
    axis, separated = 0, False
    for index in indices:
        if index is None:
            check(axis < len(shape), op, f"too many indices for a tensor of {len(shape)} dims")
            (after if indexed else before).append(shape[axis])
            axis += 1
            continue
        separated = separated or bool(after)
        if _is_mask(index):
            covered = shape[axis:axis + index.ndim]
            check(index.shape == covered, op, f"the mask of shape {list(index.shape)} does not match the indexed "
                                              f"tensor's dims {list(covered)} starting at dim {axis}")
            indexed.append((int(np.count_nonzero(index)),))
            axis += index.ndim
        else:
            check(axis < len(shape), op, f"too many indices for a tensor of {len(shape)} dims")
            indexed.append(index.shape)
            axis += 1
    result = broadcast_shapes(op, *indexed) if indexed else ()
    kept_after = tuple(after) + shape[axis:]
    if separated:  # index tensors apart: their dims go in front
        return result + tuple(before) + kept_after
    return tuple(before) + result + kept_after


@register_named("aten::index.Tensor_out")
def index(op: str, self, indices, out) -> list[tuple]:
    return [index_shape(op, self.shape, indices)]


@register_named("aten::index_select.out")
def index_select(op: str, self, dim, index, out) -> list[tuple]:
    """self with dim ``dim`` replaced by one entry per index (a 0-dim self stays 0-dim)."""
    check(index.ndim <= 1, op, f"index must be 0-D or 1-D, got shape {list(index.shape)}")
    axis = wrap_dim(dim, self.ndim, op)
    if self.ndim == 0:
        check(index.size == 1, op, f"indexing a 0-dim tensor takes one index, got {index.size}")
        return [()]
    return [replaced(self.shape, axis, index.size)]


@register_named("aten::gather.out")
def gather(op: str, self, dim, index, sparse_grad, out) -> list[tuple]:
    wrap_dim(dim, self.ndim, op)
    check(max(index.ndim, 1) == max(self.ndim, 1), op, f"index has {index.ndim} dims, self has {self.ndim}")
    return [index.shape]


@register_named("aten::embedding.out")
def embedding(op: str, weight, indices, padding_idx, scale_grad_by_freq, sparse, out) -> list[tuple]:
    check(weight.ndim == 2, op, f"weight must be 2-D, got shape {list(weight.shape)}")
    return [indices.shape + weight.shape[1:]]


@register_named("aten::embedding_dense_backward.out")
def embedding_dense_backward(op: str, grad_output, indices, num_weights, padding_idx, scale_grad_by_freq,
                             out) -> list[tuple]:
    check(grad_output.ndim > 0, op, "grad_output must have a feature dim")
    return [(num_weights, grad_output.shape[-1])]


_FAST_SUM_DTYPES = ("float32", "float16", "bfloat16")


@register_named("aten::_embedding_bag.out", "aten::_embedding_bag_forward_only.out")
def embedding_bag(op: str, weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                  include_last_offset, padding_idx, out0, out1, out2, out3) -> list[tuple]:
    """ATen's four outputs: the bags' rows; the bag of each index (empty on the fast path
    of sum-mode bags over float, half or bfloat16 weights without padding_idx); the bag
    sizes; the max rows' indices (mode 2), else the bag sizes' shape. ``_embedding_bag``
    sizes bags per bag, the forward-only variant per offset in sum mode."""
    check(weight.ndim == 2 and indices.ndim == 1 and offsets.ndim == 1, op,
          f"expects a 2-D weight and 1-D indices and offsets, got shapes {list(weight.shape)}, "
          f"{list(indices.shape)}, {list(offsets.shape)}")
    bags = offsets.shape[0] - bool(include_last_offset)
    check(bags >= 0, op, "include_last_offset needs at least one offset")
    rows = (bags, weight.shape[1])
    fast = mode == 0 and weight.dtype.name in _FAST_SUM_DTYPES and padding_idx < 0
    sizes = offsets.shape if mode == 0 and op == "aten::_embedding_bag_forward_only.out" else (bags,)
    return [rows, (0,) if fast else indices.shape, sizes, rows if mode == 2 else sizes]
