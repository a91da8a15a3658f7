"""``segment_reduce``: consecutive segments along ``axis`` (given by ``lengths`` or
``offsets``, batched over the dims before ``axis``) reduced by sum, mean, max, min or prod.

As in ATen: ``initial`` starts every reduction (and is the result of an empty segment);
without it an empty segment gives 0, NaN, -inf, inf or 1; mean divides by the segment's
length; NaN propagates through max and min. Floating point data only.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import INT64, is_floating
from torchedge.kernels.portable.bucketing import binary_search
from torchedge.kernels.portable.common import check, fail, quiet, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["segment_reduce"]

_IDENTITY = {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf, "prod": 1.0}
_UFUNC = {"sum": np.add, "mean": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def _given(op: str, lengths, offsets):
    """The one of lengths and offsets that is given."""
    if (lengths is None) == (offsets is None):
        fail(op, "exactly one of lengths or offsets must be given")
    return lengths if lengths is not None else offsets


def _lengths(op: str, data, lengths, indices, offsets, axis) -> tuple[np.ndarray, int]:
    """The segment lengths as (batch, S) int64, and the wrapped axis."""
    check(indices is None, op, "indices is not supported yet")
    given = _given(op, lengths, offsets)
    ax = wrap_dim(axis, data.ndim, op)
    check(given.dtype in (INT64, np.dtype(np.int32)), op, f"lengths/offsets must be int64 or int32, got {given.dtype}")
    check(given.ndim >= 1, op, "lengths/offsets must have at least one dimension")
    check(ax == given.ndim - 1, op, f"axis ({ax}) must be the last dim of lengths/offsets ({given.ndim - 1})")
    check(
        given.shape[:-1] == data.shape[:ax],
        op,
        f"lengths/offsets batch dims {list(given.shape[:-1])} must match data's {list(data.shape[:ax])}",
    )
    given = given.reshape(-1, given.shape[-1]).astype(INT64)
    if offsets is not None:
        check(given.shape[1] >= 1, op, "offsets must have at least one element")
        given = np.diff(given, axis=1)
    return given, ax


def _shape(op: str, data, reduce, lengths, indices, offsets, axis, unsafe, initial, out) -> list[tuple]:
    ax = wrap_dim(axis, data.ndim, op)
    count = _given(op, lengths, offsets).shape[-1] - (offsets is not None)
    return [data.shape[:ax] + (count,) + data.shape[ax + 1 :]]


@register_kernel("aten::segment_reduce.out", shape=_shape)
def segment_reduce(data, reduce, lengths, indices, offsets, axis, unsafe, initial, out):
    op = "aten::segment_reduce.out"
    check(reduce in _IDENTITY, op, f"reduce must be one of {list(_IDENTITY)}, got '{reduce}'")
    check(is_floating(data.dtype), op, f"not implemented for dtype {data.dtype}")
    segments, ax = _lengths(op, data, lengths, indices, offsets, axis)
    size = data.shape[ax]
    if not unsafe:
        check(bool((segments >= 0).all()), op, "lengths contains negative value!")
        if not bool((segments.sum(axis=1) == size).all()):
            fail(op, "Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) when !unsafe.")
    batch, count = segments.shape
    inner = math.prod(data.shape[ax + 1 :])
    rows = data.reshape(batch, size, inner)
    ends = np.cumsum(np.maximum(segments, 0), axis=1)
    positions = np.broadcast_to(np.arange(size, dtype=INT64), (batch, size))
    segment = binary_search(ends, positions, right=True)  # the segment of each position
    keep = segment < count
    target = (np.arange(batch)[:, None] * count + segment)[keep]
    start = _IDENTITY[reduce] if initial is None else float(initial)
    result = np.full((batch * count, inner), start, data.dtype)
    with quiet():
        _UFUNC[reduce].at(result, target, rows[keep])
        if reduce == "mean":
            lengths_seen = np.bincount(target, minlength=batch * count)[:, None]
            empty = np.nan if initial is None else float(initial)
            result = np.where(lengths_seen > 0, result / np.maximum(lengths_seen, 1).astype(data.dtype), empty)
    write(out, result.reshape(data.shape[:ax] + (count,) + data.shape[ax + 1 :]))
