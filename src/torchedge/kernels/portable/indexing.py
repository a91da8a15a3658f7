"""Gathers and masked writes: index, index_select, gather, embedding (and embedding_bag,
its backward), nonzero, masked_select, masked_fill, tril."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.allocator import allocate_output
from torchedge.kernels.dtypes import BOOL, INT64, accumulate_dtype
from torchedge.kernels.portable.common import as_scalar, check, fail, quiet, wrap_dim, write
from torchedge.kernels.portable.shape_rules import broadcast_inputs, broadcast_shapes, replaced, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "index_key",
    "index",
    "index_select",
    "gather",
    "embedding",
    "embedding_bag",
    "embedding_dense_backward",
    "nonzero",
    "masked_select",
    "masked_fill",
    "tril",
]


def _check_indices(op: str, index: np.ndarray, size: int, negative_ok: bool = False) -> None:
    if index.size:
        low, high = int(index.min()), int(index.max())
        if not ((-size if negative_ok else 0) <= low and high < size):
            fail(op, f"index {low if low < 0 else high} is out of bounds for dimension of size {size}")


def _is_mask(index: np.ndarray) -> bool:
    return index.dtype == np.bool_ or index.dtype == np.uint8  # a uint8 index is a (legacy) mask


def _check_index_count(op: str, indices, ndim: int) -> None:
    if len(indices) > ndim:
        fail(op, f"too many indices ({len(indices)}) for a tensor of {ndim} dims")


def _check_axis(op: str, axis: int, ndim: int) -> None:
    """The dim an index tensor (or None) indexes exists."""
    if axis >= ndim:
        fail(op, f"too many indices for a tensor of {ndim} dims")


def _check_mask(op: str, mask, shape: tuple, axis: int) -> None:
    """A mask's shape is that of the dims it covers, from ``axis`` on."""
    covered = shape[axis : axis + mask.ndim]
    if mask.shape != covered:
        fail(
            op,
            f"the mask of shape {list(mask.shape)} does not match the indexed "
            f"tensor's dims {list(covered)} starting at dim {axis}",
        )


def index_key(op: str, self: np.ndarray, indices) -> tuple:
    """The NumPy key for ATen's advanced indexing ``self[indices]``: NumPy's rules are ATen's
    (None keeps a dim, bool masks select their nonzero positions over as many dims as they
    have, index tensors broadcast, and separated index tensors move their dims to the front)."""
    _check_index_count(op, indices, self.ndim)
    key, axis = [], 0
    for idx in indices:
        if idx is None:
            _check_axis(op, axis, self.ndim)
            key.append(slice(None))
            axis += 1
        elif _is_mask(idx):
            _check_mask(op, idx, self.shape, axis)
            key.append(idx.astype(BOOL, copy=False))
            axis += idx.ndim
        else:
            _check_axis(op, axis, self.ndim)
            _check_indices(op, idx, self.shape[axis], negative_ok=True)
            key.append(idx)
            axis += 1
    return tuple(key)


def index_shape(op: str, shape: tuple, indices) -> tuple:
    """The shape of ATen's (and NumPy's) advanced indexing ``self[indices]``.

    None keeps a dim; index tensors broadcast together, and their shape replaces the dims
    they index: where the first of them stood when they are adjacent, in front otherwise.
    A mask over k dims acts as one index of its number of true values: the only place a
    shape function reads data, since that count is the output size.
    """
    _check_index_count(op, indices, len(shape))
    before: list[int] = []  # kept dims before / after the first index tensor, index shapes
    after: list[int] = []
    indexed: list[tuple] = []
    axis, separated = 0, False
    for index in indices:
        if index is None:
            _check_axis(op, axis, len(shape))
            (after if indexed else before).append(shape[axis])
            axis += 1
            continue
        separated = separated or bool(after)
        if _is_mask(index):
            _check_mask(op, index, shape, axis)
            indexed.append((int(np.count_nonzero(index)),))
            axis += index.ndim
        else:
            _check_axis(op, axis, len(shape))
            indexed.append(index.shape)
            axis += 1
    result = broadcast_shapes(op, *indexed) if indexed else ()
    kept_after = tuple(after) + shape[axis:]
    if separated:  # index tensors apart: their dims go in front
        return result + tuple(before) + kept_after
    return tuple(before) + result + kept_after


def _index_shape(op: str, self, indices, out) -> list[tuple]:
    return [index_shape(op, self.shape, indices)]


@register_kernel("aten::index.Tensor_out", shape=_index_shape, mask_index_arg=1)
def index(self, indices, out):
    write(out, self[index_key("aten::index.Tensor_out", self, indices)])


def _index_select_shape(op: str, self, dim, index, out) -> list[tuple]:
    """self with dim ``dim`` replaced by one entry per index (a 0-dim self stays 0-dim)."""
    check(index.ndim <= 1, op, f"index must be 0-D or 1-D, got shape {list(index.shape)}")
    axis = wrap_dim(dim, self.ndim, op)
    if self.ndim == 0:
        check(index.size == 1, op, f"indexing a 0-dim tensor takes one index, got {index.size}")
        return [()]
    return [replaced(self.shape, axis, index.size)]


@register_kernel("aten::index_select.out", shape=_index_select_shape)
def index_select(self, dim, index, out):
    op = "aten::index_select.out"
    axis = wrap_dim(dim, self.ndim, op)
    if self.ndim == 0:
        _check_indices(op, index, 1)
        write(out, self)
        return
    _check_indices(op, index, self.shape[axis])
    write(out, np.take(self, index.reshape(-1), axis=axis))


def _gather_axis(op: str, self, dim, index) -> int:
    """The axis gather indexes; index has self's dims (a 0-dim tensor counts as 1-dim)."""
    axis = wrap_dim(dim, self.ndim, op)
    if max(index.ndim, 1) != max(self.ndim, 1):
        fail(op, f"index has {index.ndim} dims, self has {self.ndim}")
    return axis


def _gather_shape(op: str, self, dim, index, sparse_grad, out) -> list[tuple]:
    _gather_axis(op, self, dim, index)
    return [index.shape]


@register_kernel("aten::gather.out", shape=_gather_shape)
def gather(self, dim, index, sparse_grad, out):
    """out[i][j][k] = self[index[i][j][k]][j][k] (for dim 0); index may be smaller than
    self in the other dims."""
    op = "aten::gather.out"
    axis = _gather_axis(op, self, dim, index)
    if self.ndim == 0:  # ATen treats 0-dim tensors as 1-dim here
        self = self.reshape(1)
    if index.ndim == 0:
        index, out = index.reshape(1), out.reshape(1)
    check(
        all(i <= s for d, (i, s) in enumerate(zip(index.shape, self.shape)) if d != axis),
        op,
        f"index shape {list(index.shape)} exceeds self shape {list(self.shape)} outside dim {dim}",
    )
    _check_indices(op, index, self.shape[axis])
    window = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index.shape))
    write(out, np.take_along_axis(self[window], index.astype(np.intp, copy=False), axis=axis))


def _check_embedding_weight(op: str, weight) -> None:
    if weight.ndim != 2:
        fail(op, f"weight must be 2-D, got shape {list(weight.shape)}")


def _embedding_shape(op: str, weight, indices, padding_idx, scale_grad_by_freq, sparse, out) -> list[tuple]:
    _check_embedding_weight(op, weight)
    return [indices.shape + weight.shape[1:]]


@register_kernel("aten::embedding.out", shape=_embedding_shape)
def embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse, out):
    op = "aten::embedding.out"
    _check_embedding_weight(op, weight)
    _check_indices(op, indices, weight.shape[0])
    if out.dtype == weight.dtype:
        np.take(weight, indices, axis=0, out=out)
    else:
        write(out, np.take(weight, indices, axis=0))


def _bags(op: str, offsets: np.ndarray, count: int, num_bags: int) -> np.ndarray:
    """The bag of each of ``count`` indices: bag b starts at offsets[b], and the last bag runs
    to the end (with include_last_offset, ATen's reading when offsets[-1] != count)."""
    starts = offsets.reshape(-1)[:num_bags].astype(np.int64)
    if count and num_bags:
        check(
            bool(starts[0] == 0 and np.all(np.diff(starts) >= 0) and starts[-1] <= count),
            op,
            f"offsets must start at 0 and not decrease up to the {count} indices, got {starts.tolist()}",
        )
    return np.clip(np.searchsorted(starts, np.arange(count), side="right") - 1, 0, max(num_bags - 1, 0))


def _bag_max(rows, bag, picked, num_bags):
    """Per bag and feature, the largest row value and the index of the first row holding it."""
    if len(rows) == 0:
        return 0, 0
    best = np.full((num_bags, rows.shape[1]), -np.inf, rows.dtype)
    np.maximum.at(best, bag, rows)
    position = np.where(rows == best[bag], np.arange(len(rows))[:, None], len(rows))
    first = np.full(best.shape, len(rows), np.int64)
    np.minimum.at(first, bag, position)
    found = first < len(rows)
    return np.where(found, best, 0), np.where(found, picked[np.minimum(first, len(rows) - 1)], 0)


def _check_bag_inputs(op: str, weight, indices, offsets) -> None:
    if not (weight.ndim == 2 and indices.ndim == 1 and offsets.ndim == 1):
        fail(
            op,
            f"expects a 2-D weight and 1-D indices and offsets, got shapes {list(weight.shape)}, "
            f"{list(indices.shape)}, {list(offsets.shape)}",
        )


_FAST_SUM_DTYPES = ("float32", "float16", "bfloat16")


def _embedding_bag_shape(
    op: str,
    weight,
    indices,
    offsets,
    scale_grad_by_freq,
    mode,
    sparse,
    per_sample_weights,
    include_last_offset,
    padding_idx,
    out0,
    out1,
    out2,
    out3,
) -> list[tuple]:
    """ATen's four outputs: the bags' rows; the bag of each index (empty on the fast path
    of sum-mode bags over float, half or bfloat16 weights without padding_idx); the bag
    sizes; the max rows' indices (mode 2), else the bag sizes' shape. ``_embedding_bag``
    sizes bags per bag, the forward-only variant per offset in sum mode."""
    _check_bag_inputs(op, weight, indices, offsets)
    bags = offsets.shape[0] - bool(include_last_offset)
    check(bags >= 0, op, "include_last_offset needs at least one offset")
    rows = (bags, weight.shape[1])
    fast = mode == 0 and weight.dtype.name in _FAST_SUM_DTYPES and padding_idx < 0
    sizes = offsets.shape if mode == 0 and op == "aten::_embedding_bag_forward_only.out" else (bags,)
    return [rows, (0,) if fast else indices.shape, sizes, rows if mode == 2 else sizes]


@register_kernel("aten::_embedding_bag.out", "aten::_embedding_bag_forward_only.out", shape=_embedding_bag_shape)
def embedding_bag(
    weight,
    indices,
    offsets,
    scale_grad_by_freq,
    mode,
    sparse,
    per_sample_weights,
    include_last_offset,
    padding_idx,
    out0,
    out1,
    out2,
    out3,
):
    """Sum (mode 0, optionally weighted per index), mean (1) or max (2) of the weight rows of
    each bag; padding_idx rows are left out, empty bags give zeros. The other outs are the
    bag of each index (when planned non-empty), the bag sizes (mode 1, 2) and the indices of
    the max rows (mode 2; mode 1 repeats the bag sizes)."""
    op = "aten::_embedding_bag.out"
    _check_bag_inputs(op, weight, indices, offsets)
    check(mode in (0, 1, 2), op, f"mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}")
    check(per_sample_weights is None or mode == 0, op, "per_sample_weights are only supported with mode 0 (sum)")
    _check_indices(op, indices, weight.shape[0])
    num_bags = out0.shape[0]
    bag = _bags(op, offsets, indices.size, num_bags)
    keep = indices != padding_idx
    bag, picked = bag[keep], indices[keep]
    rows = weight[picked].astype(accumulate_dtype(weight.dtype), copy=False)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[keep, None].astype(rows.dtype)
    sizes = np.bincount(bag, minlength=num_bags)
    if mode == 2:
        result, max_indices = _bag_max(rows, bag, picked, num_bags)
    else:
        result = np.zeros((num_bags, weight.shape[1]), rows.dtype)
        np.add.at(result, bag, rows)
        if mode == 1:
            result /= np.maximum(sizes, 1)[:, None]
        max_indices = sizes if mode == 1 else 0
    write(out0, result)
    if out1.size:
        write(out1, _bags(op, offsets, indices.size, num_bags))
    write(out2, sizes if mode else 0)
    write(out3, max_indices)


def _embedding_dense_backward_shape(
    op: str, grad_output, indices, num_weights, padding_idx, scale_grad_by_freq, out
) -> list[tuple]:
    check(grad_output.ndim > 0, op, "grad_output must have a feature dim")
    return [(num_weights, grad_output.shape[-1])]


@register_kernel("aten::embedding_dense_backward.out", shape=_embedding_dense_backward_shape)
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq, out):
    """The weight gradient of embedding: each index's gradient row added to its weight row
    (divided by how often the index occurs with scale_grad_by_freq); padding_idx gets none."""
    op = "aten::embedding_dense_backward.out"
    flat = indices.reshape(-1).astype(np.int64)
    _check_indices(op, flat, num_weights)
    grad = grad_output.reshape(flat.size, -1).astype(accumulate_dtype(grad_output.dtype))
    if scale_grad_by_freq:
        grad = grad / np.bincount(flat, minlength=num_weights)[flat, None].astype(grad.dtype)
    keep = flat != padding_idx
    result = np.zeros((num_weights, grad.shape[1]), grad.dtype)
    np.add.at(result, flat[keep], grad[keep])
    write(out, result)


@register_kernel("aten::nonzero.out", data_dependent=True)
def nonzero(self, out):
    """The (n, ndim) int64 coordinates of the nonzero (or nan) elements, in row-major order;
    the output size depends on the data, so the result is allocated, not written to out."""
    with quiet():
        coordinates = np.argwhere(self != 0)
    result = allocate_output(coordinates.shape, INT64)
    write(result, coordinates)
    return result


@register_kernel("aten::masked_select.out", data_dependent=True)
def masked_select(self, mask, out):
    """The elements of broadcast(self, mask) where mask is true, as an allocated 1-D tensor."""
    op = "aten::masked_select.out"
    check(mask.dtype == BOOL, op, f"mask must be a bool tensor, got {mask.dtype}")
    shape = np.broadcast_shapes(self.shape, mask.shape)
    where = np.broadcast_to(mask, shape)
    result = allocate_output((int(np.count_nonzero(where)),), self.dtype)
    write(result, np.broadcast_to(self, shape)[where])
    return result


@register_kernel("aten::masked_fill.Scalar_out", shape=broadcast_inputs)
def masked_fill(self, mask, value, out):
    write(out, self)
    np.copyto(out, as_scalar(value, out.dtype), where=mask.astype(BOOL, copy=False))


@register_kernel("aten::tril.out", shape=same_as())
def tril(self, diagonal, out):
    """Zero the entries above the ``diagonal``-th diagonal of the last two dims."""
    check(self.ndim >= 2, "aten::tril.out", f"expects at least 2 dims, got shape {list(self.shape)}")
    write(out, self)
    above = ~np.tri(*self.shape[-2:], k=diagonal, dtype=BOOL)
    np.copyto(out, 0, casting="unsafe", where=above)
