"""Counting into bins: ``histc``, ``histogram`` (bin edges given, or a bin count and range),
``histogramdd`` (the same per dim of the points' last axis) and ``bincount``.

As in ATen, evenly spaced edges are ATen's ``linspace`` in the input dtype; ``histc`` places
a value by linear interpolation over the range, ``histogram`` with a bin count corrects that
guess against the neighbouring edges, and ``histogram`` with given edges binary-searches
them. Values outside ``[first edge, last edge]`` (and NaN) are not counted; the last bin
includes its right edge.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.allocator import allocate_output
from torchedge.kernels.dtypes import INT64
from torchedge.kernels.portable.bucketing import binary_search
from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.registry import register_kernel

__all__ = [
    "linspace_edges",
    "histc",
    "histogram_bins",
    "histogram_count",
    "bincount",
    "histogramdd_bin_edges",
    "histogramdd_from_bin_cts",
    "histogramdd_from_bin_tensors",
]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _split(a: np.ndarray):
    hi = a * 134217729.0  # Veltkamp split of float64 into two 26-bit halves
    hi = hi - (hi - a)
    return hi, a - hi


def _fused_multiply_add(c: np.ndarray, s: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``c + s * k`` rounded once in float64, as a compiled FMA computes it (the product's
    rounding error is recovered exactly and added back)."""
    p = s * k
    (sh, sl), (kh, kl) = _split(s), _split(k)
    err = ((sh * kh - p) + sh * kl + sl * kh) + sl * kl
    return (c + p) + err


def linspace_edges(start: float, end: float, steps: int, dtype) -> np.ndarray:
    """ATen's ``linspace`` for a float dtype: the first half counts up from ``start`` and the
    second half down from ``end``, with the step computed in ``dtype`` and each point one
    fused multiply-add (one rounding), as ATen's compiled CPU kernel computes it."""
    dtype = np.dtype(dtype)
    t = dtype.type
    first, last = t(start), t(end)
    if steps == 1:
        return np.array([first], dtype)
    with quiet():
        step = (last - first) / t(steps - 1)
        index = np.arange(steps, dtype=_F64)
        s = np.full(steps, step, _F64)
        if dtype == _F64:
            up = _fused_multiply_add(np.full(steps, first), s, index)
            down = _fused_multiply_add(np.full(steps, last), -s, steps - 1 - index)
        else:  # the float64 product is exact, so one float64 sum rounds like the float32 FMA
            up = np.float64(first) + s * index
            down = np.float64(last) - s * (steps - 1 - index)
    return np.where(np.arange(steps) < steps // 2, up, down).astype(dtype)


def _check_float(op: str, self: np.ndarray) -> None:
    check(
        self.dtype in (_F32, _F64), op, f"not implemented for dtype {self.dtype}: the input must be float32 or float64"
    )


def _check_bins(op: str, bins: int) -> None:
    if bins <= 0:
        fail(op, f"bins must be > 0, but got {bins}")


def _check_bin_counts(op: str, bins) -> None:
    """histogramdd's bin count of each dim is positive."""
    for i, count in enumerate(bins):
        if count <= 0:
            fail(op, f"bins must be > 0, but got {count} for dimension {i}")


def _check_edges(op: str, self, edges, i: int) -> None:
    """Given bin edges (of dim ``i``) are a 1-D tensor of the input's dtype with at least 2 edges."""
    if edges.dtype != self.dtype:
        fail(op, f"bins tensor for dimension {i} has dtype {edges.dtype}, expected the input's dtype {self.dtype}")
    if edges.ndim != 1:
        fail(op, f"bins tensor should have one dimension, but got {edges.ndim} for dimension {i}")
    if edges.size < 2:
        fail(op, f"bins must be > 0, but got {edges.size - 1} for dimension {i}")


def _check_weight_dtype(op: str, self, weight) -> None:
    if weight.dtype != self.dtype:
        fail(op, f"weight dtype {weight.dtype} must be the input's dtype {self.dtype}")


def _bin_range(op: str, left: float, right: float, dim: int | None = None) -> tuple[float, float]:
    """The (first, last) edge of a histogram(dd) range checked finite and ordered (``dim``: which
    dim of histogramdd), an empty range widened by 0.5 each way."""
    finite = math.isfinite(left) and math.isfinite(right)
    if not finite or left > right:
        where = "" if dim is None else f" for dimension {dim}"
        if not finite:
            fail(op, f"the range [{left}, {right}] is not finite{where}")
        fail(op, f"min should not exceed max, but got min {left} max {right}{where}")
    return (left - 0.5, right + 0.5) if left == right else (left, right)


def _accumulate(op: str, values, weight, pos, keep, bins: int, dtype) -> np.ndarray:
    w = None if weight is None else weight.reshape(-1)[keep]
    with quiet():
        hist = np.bincount(pos[keep], weights=w, minlength=bins)[:bins]
    return hist.astype(dtype)


def _linear_positions(values, edges, local_search: bool):
    """Bin of each value in ``[edges[0], edges[-1]]`` over evenly spaced ``edges``."""
    bins = edges.size - 1
    left, right = edges[0], edges[-1]
    with quiet():
        keep = (values >= left) & (values <= right)
        guess = ((values - left) * values.dtype.type(bins) / (right - left))[keep]
    pos = np.zeros(values.shape, INT64)
    pos[keep] = guess.astype(INT64)
    if local_search:
        low = np.maximum(pos - 1, 0)
        high = np.minimum(pos + 2, edges.size)
        count = np.zeros_like(pos)
        for k in range(3):  # the window holds at most three edges
            at = low + k
            inside = at < high
            count += inside & (edges[np.minimum(at, edges.size - 1)] <= values)
        pos = low + count - 1
    pos[pos >= bins] = bins - 1  # the last bin includes its right edge
    return pos, keep


def _density(hist: np.ndarray, edges: np.ndarray) -> np.ndarray:
    with quiet():
        hist = hist / hist.sum(dtype=hist.dtype)
        return (hist / np.diff(edges)).astype(hist.dtype)


@register_kernel("aten::histc.out", shape=lambda op, self, bins, min, max, out: [(bins,)])
def histc(self, bins, min, max, out):
    op = "aten::histc.out"
    _check_float(op, self)
    _check_bins(op, bins)
    left, right = float(min), float(max)
    if left == right and self.size > 0:
        left, right = float(self.min()), float(self.max())
    if left == right:
        left, right = left - 1, right + 1
    check(math.isfinite(left) and math.isfinite(right), op, f"range of [{left}, {right}] is not finite")
    check(left < right, op, "max must be larger than min")
    edges = linspace_edges(left, right, bins + 1, self.dtype)
    values = self.reshape(-1)
    pos, keep = _linear_positions(values, edges, local_search=False)
    write(out, _accumulate(op, values, None, pos, keep, bins, self.dtype))


def _check_weight(op: str, self, weight) -> None:
    if weight is None:
        return
    _check_weight_dtype(op, self, weight)
    check(
        weight.shape == self.shape,
        op,
        f"weight shape {list(weight.shape)} must be the input's shape {list(self.shape)}",
    )


def _histogram_shapes_bins(op: str, self, bins, *rest) -> list[tuple]:
    return [(max(bins.shape[0] - 1, 0),) if bins.ndim == 1 else (0,), bins.shape]


@register_kernel("aten::histogram.bins_tensor_out", shape=_histogram_shapes_bins)
def histogram_bins(self, bins, weight, density, hist, bin_edges):
    op = "aten::histogram.bins_tensor_out"
    _check_float(op, self)
    _check_edges(op, self, bins, 0)
    _check_weight(op, self, weight)
    edges = np.array(bins)
    count = edges.size - 1
    values = self.reshape(-1)
    with quiet():
        keep = (values >= edges[0]) & (values <= edges[-1])
    pos = binary_search(edges.reshape(1, -1), values.reshape(1, -1), right=True).reshape(-1) - 1
    pos = np.clip(pos, 0, max(count - 1, 0))
    result = _accumulate(op, values, weight, pos, keep, count, self.dtype)
    write(hist, _density(result, edges) if density else result)
    write(bin_edges, edges)


def _histogram_shapes_count(op: str, self, bins, *rest) -> list[tuple]:
    return [(bins,), (bins + 1,)]


@register_kernel("aten::histogram.bin_ct_out", shape=_histogram_shapes_count)
def histogram_count(self, bins, range, weight, density, hist, bin_edges):
    op = "aten::histogram.bin_ct_out"
    _check_float(op, self)
    _check_bins(op, bins)
    _check_weight(op, self, weight)
    if range is not None:
        check(len(range) == 2, op, f"range should have 2 elements, got {len(range)}")
        left, right = float(range[0]), float(range[1])
    elif self.size > 0:
        left, right = float(self.min()), float(self.max())
    else:
        left, right = 0.0, 1.0
    left, right = _bin_range(op, left, right)
    edges = linspace_edges(left, right, bins + 1, self.dtype)
    values = self.reshape(-1)
    pos, keep = _linear_positions(values, edges, local_search=True)
    result = _accumulate(op, values, weight, pos, keep, bins, self.dtype)
    write(hist, _density(result, edges) if density else result)
    write(bin_edges, edges)


@register_kernel("aten::bincount.out", data_dependent=True)
def bincount(self, weights, minlength, out):
    """Counts (int64) or summed weights (float32 for float32 weights, else float64) of each
    non-negative value; the length, max(self) + 1 or ``minlength``, depends on the data."""
    op = "aten::bincount.out"
    check(self.dtype.kind in "iu", op, f"not implemented for dtype {self.dtype}: expected an integer tensor")
    check(minlength >= 0, op, f"minlength should be >= 0, got {minlength}")
    if self.ndim != 1 or (self.size > 0 and self.min() < 0):
        fail(op, "bincount only supports 1-d non-negative integral inputs")
    if weights is not None:
        check(
            weights.ndim == 1 and weights.shape[0] == self.shape[0],
            op,
            f"weights should be 1-d and have the same length as input, got {list(weights.shape)}",
        )
    if self.size == 0:
        result = allocate_output((minlength,), INT64)
        result[...] = 0
        return result
    length = max(int(self.max()) + 1, minlength)
    dtype = INT64 if weights is None else (_F32 if weights.dtype == _F32 else _F64)
    w = None if weights is None else weights.astype(_F64)
    counts = np.bincount(self.astype(INT64), weights=w, minlength=length)
    result = allocate_output((length,), dtype)
    write(result, counts)
    return result


# -- histogramdd: the last dim of ``self`` holds each point's D coordinates ------------------


def _points(op: str, self, bin_dims: int, weight):
    """``self`` as (points, D) after ATen's checks, and the weights as (points,) or None."""
    _check_float(op, self)
    check(self.ndim >= 2, op, f"input tensor should have at least 2 dimensions, but got {self.ndim}")
    d = self.shape[-1]
    check(bin_dims == d, op, f"expected {d} sequences of bins for a {d}-dimensional histogram, but got {bin_dims}")
    if weight is not None:
        _check_weight_dtype(op, self, weight)
        want = list(self.shape[:-1])
        check(
            list(weight.shape or (1,)) == want,
            op,
            f"weight shape {list(weight.shape)} must be the input's shape without its last dim {want}",
        )
        weight = weight.reshape(-1)
    return self.reshape(-1, d), weight


def _outer_edges(op: str, points, limits) -> list[tuple[float, float]]:
    """Each dim's (first, last) edge: ``limits`` (the ``range`` argument), else the data's min
    and max ([0, 1] without data), an empty range widened by 0.5 each way."""
    d = points.shape[1]
    if limits is not None:
        check(len(limits) == 2 * d, op, f"for a {d}-dimensional histogram range should have {2 * d} elements")
        pairs = [(float(limits[2 * i]), float(limits[2 * i + 1])) for i in range(d)]
    elif points.shape[0] > 0:
        pairs = list(zip(points.min(0).tolist(), points.max(0).tolist()))
    else:
        pairs = [(0.0, 1.0)] * d
    return [_bin_range(op, left, right, i) for i, (left, right) in enumerate(pairs)]


def _count_edges(op: str, points, bins, limits) -> list[np.ndarray]:
    _check_bin_counts(op, bins)
    outer = _outer_edges(op, points, limits)
    return [linspace_edges(left, right, count + 1, points.dtype) for (left, right), count in zip(outer, bins)]


def _histogramdd(op: str, points, weight, edges, density: bool, evenly_spaced: bool, hist) -> None:
    """Count (or sum the weights of) the points into the D-dimensional grid of ``edges``;
    a point outside any dim's edges (or nan) is not counted. Evenly spaced edges place a
    value by ATen's linear guess corrected against the neighbouring edges, others by binary
    search."""
    keep = np.ones(points.shape[0], bool)
    flat = np.zeros(points.shape[0], INT64)
    for i, dim_edges in enumerate(edges):
        values = np.ascontiguousarray(points[:, i])
        bins = dim_edges.size - 1
        if not evenly_spaced:
            with quiet():
                inside = (values >= dim_edges[0]) & (values <= dim_edges[-1])
            pos = binary_search(dim_edges.reshape(1, -1), values.reshape(1, -1), right=True).reshape(-1) - 1
            pos = np.clip(pos, 0, max(bins - 1, 0))
        else:
            pos, inside = _linear_positions(values, dim_edges, local_search=True)
        keep &= inside
        flat = flat * max(bins, 1) + pos
    size = math.prod(e.size - 1 for e in edges)
    result = _accumulate(op, None, weight, flat, keep, size, points.dtype).reshape(hist.shape)
    if density:
        with quiet():
            result = result / result.sum(dtype=result.dtype)
            for i, dim_edges in enumerate(edges):
                shape = [1] * len(edges)
                shape[i] = dim_edges.size - 1
                result = result / np.diff(dim_edges).reshape(shape)
    write(hist, result)


def _dd_edges_shapes(op: str, self, bins, range, weight, density, *out) -> list[tuple]:
    _check_bin_counts(op, bins)
    return [(count + 1,) for count in bins]


def _dd_counts_shape(op: str, self, bins, range, weight, density, out) -> list[tuple]:
    _check_bin_counts(op, bins)
    return [tuple(bins)]


@register_kernel("aten::_histogramdd_bin_edges.out", shape=_dd_edges_shapes)
def histogramdd_bin_edges(self, bins, range, weight, density, out):
    """Each dim's evenly spaced edges (ATen's linspace in the input dtype)."""
    op = "aten::_histogramdd_bin_edges.out"
    points, _ = _points(op, self, len(bins), weight)
    check(len(out) == len(bins), op, f"expected {len(bins)} output tensors, got {len(out)}")
    for target, dim_edges in zip(out, _count_edges(op, points, bins, range)):
        write(target, dim_edges)


@register_kernel("aten::_histogramdd_from_bin_cts.out", shape=_dd_counts_shape)
def histogramdd_from_bin_cts(self, bins, range, weight, density, out):
    """The histogram over evenly spaced edges: ATen's linear guess, corrected against the
    neighbouring edges; the last bin of each dim includes its right edge."""
    op = "aten::_histogramdd_from_bin_cts.out"
    points, weight = _points(op, self, len(bins), weight)
    edges = _count_edges(op, points, bins, range)
    _histogramdd(op, points, weight, edges, density, True, out)


def _dd_tensor_shapes(op: str, self, bins, weight, density, out) -> list[tuple]:
    return [tuple(max(b.shape[0] - 1, 0) if b.ndim == 1 else 0 for b in bins)]


@register_kernel("aten::_histogramdd_from_bin_tensors.out", shape=_dd_tensor_shapes)
def histogramdd_from_bin_tensors(self, bins, weight, density, out):
    """The histogram over given edges (binary search); the last bin includes its right edge."""
    op = "aten::_histogramdd_from_bin_tensors.out"
    points, weight = _points(op, self, len(bins), weight)
    for i, dim_edges in enumerate(bins):
        _check_edges(op, self, dim_edges, i)
    _histogramdd(op, points, weight, [np.asarray(b) for b in bins], density, False, out)
