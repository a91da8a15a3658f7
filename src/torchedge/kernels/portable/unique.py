"""Unique elements and slices: ``_unique2``, ``unique_consecutive``, ``unique_dim`` and
``unique_dim_consecutive``, for every dtype (bool included).

Their output sizes depend on the data, so these kernels allocate their three results (values,
int64 inverse indices, int64 counts) and return them (``data_dependent``). As in eager, an
inverse or counts output that its flag turns off is empty, but the ``dim`` variants always
compute both. Equality is ``==``: every NaN is its own
value (sorted last, in input order), and 0.0 and -0.0 are one value, whose sign follows the first
occurrence in a stable sort (eager's unstable sort may keep the other zero).
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.allocator import allocate_output
from torchedge.kernels.portable.common import check, quiet, wrap_dim
from torchedge.kernels.registry import register_kernel

__all__ = ["unique2", "unique_consecutive", "unique_dim", "unique_dim_consecutive"]

_INT64 = np.dtype(np.int64)


def _results(values: np.ndarray, inverse: np.ndarray | None, counts: np.ndarray | None):
    """Allocate and fill the three outputs; an output that is not asked for is empty (0,)."""
    outs = []
    for value, dtype in ((values, values.dtype), (inverse, _INT64), (counts, _INT64)):
        result = allocate_output((0,) if value is None else value.shape, dtype)
        if value is not None:
            np.copyto(result, value, casting="unsafe")
        outs.append(result)
    return tuple(outs)


def _group_starts(changed: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first index of each run (``changed[i]``: item ``i + 1`` starts a run) and each run's id."""
    starts = np.flatnonzero(np.concatenate(([n > 0], changed)))
    ids = np.cumsum(np.concatenate(([0], changed)).astype(_INT64)) if n > 0 else np.zeros(0, _INT64)
    return starts, ids


def _counts(starts: np.ndarray, n: int) -> np.ndarray:
    return np.diff(np.append(starts, n)).astype(_INT64)


def _keys(values: np.ndarray) -> np.ndarray:
    """Values NumPy sorts and compares natively: bfloat16 (ml_dtypes) widened exactly to float32."""
    return values if values.dtype.kind in "biuf" else values.astype(np.float32)


def _rows_differ(rows: np.ndarray) -> np.ndarray:
    """For rows (n, w): whether row ``i + 1`` differs from row ``i`` (NaN differs from NaN)."""
    with quiet():
        if rows.dtype == np.bool_:
            return np.any(rows[1:] ^ rows[:-1], axis=1)
        keys = _keys(rows)
        return np.any(keys[1:] != keys[:-1], axis=1)


@register_kernel("aten::_unique2.out", data_dependent=True)
def unique2(self, sorted, return_inverse, return_counts, out0, out1, out2):
    """The distinct values in ascending order (eager's CPU kernel sorts whether or not ``sorted``
    is set), each value's index among them (shaped like ``self``) and how often each occurs."""
    flat = self.reshape(-1)
    order = np.argsort(_keys(flat), kind="stable")
    ordered = flat[order]
    starts, ids = _group_starts(_rows_differ(ordered[:, None]), flat.size)
    inverse = None
    if return_inverse:
        inverse = np.empty(flat.size, _INT64)
        inverse[order] = ids
        inverse = inverse.reshape(self.shape)
    counts = _counts(starts, flat.size) if return_counts else None
    return _results(ordered[starts], inverse, counts)


def _move_dim(self: np.ndarray, dim: int, op: str) -> tuple[np.ndarray, int]:
    check(self.ndim > 0, op, f"dimension specified as {dim} but the tensor has no dimensions")
    axis = wrap_dim(dim, self.ndim, op)
    check(
        self.shape[axis] == 0 or self.size > 0,
        op,
        f"the tensor {list(self.shape)} has 0-sized dimensions other than dim {dim}, so unique cannot be applied",
    )
    return np.moveaxis(self, axis, 0), axis


def _slices_result(moved: np.ndarray, axis: int, picks: np.ndarray) -> np.ndarray:
    return np.moveaxis(moved[picks], 0, axis)


@register_kernel("aten::unique_consecutive.out", data_dependent=True)
def unique_consecutive(self, return_inverse, return_counts, dim, out0, out1, out2):
    """The first value of every run of equal consecutive values of the flattened ``self``
    (``dim`` set: of every run of equal consecutive slices along ``dim``)."""
    if dim is not None and self.ndim != 1:  # eager flattens a 1-D input whatever the dim
        return _consecutive_slices("aten::unique_consecutive.out", self, dim, return_inverse, return_counts)
    flat = self.reshape(-1)
    starts, ids = _group_starts(_rows_differ(flat[:, None]), flat.size)
    inverse = ids.reshape(self.shape) if return_inverse else None
    counts = _counts(starts, flat.size) if return_counts else None
    return _results(flat[starts], inverse, counts)


def _consecutive_slices(op: str, self, dim, return_inverse, return_counts):
    moved, axis = _move_dim(self, dim, op)
    n = moved.shape[0]
    starts, ids = _group_starts(_rows_differ(moved.reshape(n, math.prod(moved.shape[1:]))), n)
    return _results(_slices_result(moved, axis, starts), ids, _counts(starts, n))


@register_kernel("aten::unique_dim_consecutive.out", data_dependent=True)
def unique_dim_consecutive(self, dim, return_inverse, return_counts, out0, out1, out2):
    """The first slice along ``dim`` of every run of equal consecutive slices."""
    return _consecutive_slices("aten::unique_dim_consecutive.out", self, dim, return_inverse, return_counts)


@register_kernel("aten::unique_dim.out", data_dependent=True)
def unique_dim(self, dim, sorted, return_inverse, return_counts, out0, out1, out2):
    """The distinct slices along ``dim`` in lexicographic order (always sorted, as eager), each
    slice's index among them and how often each occurs."""
    moved, axis = _move_dim(self, dim, "aten::unique_dim.out")
    n = moved.shape[0]
    rows = moved.reshape(n, math.prod(moved.shape[1:]))
    order = np.lexsort(_keys(rows).T[::-1]) if rows.shape[1] > 0 else np.arange(n)
    starts, ids = _group_starts(_rows_differ(rows[order]), n)
    inverse = np.empty(n, _INT64)
    inverse[order] = ids
    return _results(_slices_result(moved, axis, order[starts]), inverse, _counts(starts, n))
