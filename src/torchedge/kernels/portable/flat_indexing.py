"""Indexing by flat position or by count: ``take``, ``put``, ``nonzero_static`` and
``repeat_interleave`` (the repeats-only overload that ``repeat_interleave`` lowers to)."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.allocator import allocate_output
from torchedge.kernels.dtypes import INT64
from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.registry import register_kernel

__all__ = ["take", "put", "nonzero_static", "repeat_interleave"]


def _flat_positions(op: str, name: str, self, index) -> np.ndarray:
    """``index`` (int64, negatives counting from the end) as positions into flattened ``self``."""
    check(index.dtype == INT64, op, f"{name}(): Expected a long tensor for index, but got {index.dtype}")
    numel = self.size
    flat_index = index.reshape(-1)
    if flat_index.size > 0:
        check(numel > 0, op, f"{name}(): tried to index into an empty tensor")
        low, high = int(flat_index.min()), int(flat_index.max())
        if low < -numel or high >= numel:
            bad = high if high >= numel else low
            fail(op, f"out of range: tried to access index {bad} on a tensor of {numel} elements")
    return np.where(flat_index < 0, flat_index + numel, flat_index)


@register_kernel("aten::take.out", shape=lambda op, self, index, out: [index.shape])
def take(self, index, out):
    """The elements of flattened ``self`` at ``index``, in index's shape."""
    positions = _flat_positions("aten::take.out", "take", self, index)
    write(out, self.reshape(-1)[positions].reshape(index.shape))


@register_kernel("aten::put.out", shape=lambda op, self, *rest: [self.shape])
def put(self, index, source, accumulate, out):
    """``self`` with the elements at flat positions ``index`` (negatives count from the end)
    replaced by, or with ``accumulate`` increased by, ``source``."""
    op = "aten::put.out"
    check(source.dtype == self.dtype, op, f"source dtype {source.dtype} must be self's dtype {self.dtype}")
    check(
        index.size == source.size,
        op,
        f"put_(): Expected source and index to have the same number of elements, but got source.numel() = "
        f"{source.size}, index.numel() = {index.size}",
    )
    positions = _flat_positions(op, "put_", self, index)
    flat = np.array(self).reshape(-1)
    values = source.reshape(-1)
    if accumulate:
        with quiet():
            np.add.at(flat, positions, values)
    else:
        flat[positions] = values
    write(out, flat.reshape(self.shape))


def _nonzero_static_shape(op: str, self, size, fill_value, out) -> list[tuple]:
    check(size >= 0, op, f"nonzero_static: 'size' must be an non-negative integer, but got size: {size}")
    return [(size, self.ndim)]


@register_kernel("aten::nonzero_static.out", shape=_nonzero_static_shape)
def nonzero_static(self, size, fill_value, out):
    """The first ``size`` coordinates of nonzero elements (row-major), padded with
    ``fill_value`` rows when there are fewer."""
    _nonzero_static_shape("aten::nonzero_static.out", self, size, fill_value, out)
    with quiet():
        coordinates = np.argwhere(self != 0)[:size]
    result = np.full((size, self.ndim), fill_value, INT64)
    result[: coordinates.shape[0]] = coordinates
    write(out, result)


@register_kernel("aten::repeat_interleave.Tensor_out", data_dependent=True)
def repeat_interleave(repeats, output_size, out):
    """``i`` repeated ``repeats[i]`` times, for each ``i``, in the dtype of ``repeats``."""
    op = "aten::repeat_interleave.Tensor_out"
    check(repeats.ndim == 1, op, "repeat_interleave only accept 1D vector as repeat")
    check(
        repeats.dtype in (np.dtype(np.int32), INT64), op, f"repeats has to be Long or Int tensor, got {repeats.dtype}"
    )
    if repeats.size > 0:
        check(int(repeats.min()) >= 0, op, "repeats can not be negative")
    total = int(repeats.sum(dtype=INT64))
    if output_size is not None:
        check(total == output_size, op, f"output_size {output_size} does not match the sum of repeats {total}")
    result = allocate_output((total,), repeats.dtype)
    write(result, np.repeat(np.arange(repeats.size, dtype=INT64), repeats.astype(INT64)))
    return result
