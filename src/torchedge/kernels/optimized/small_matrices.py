"""Resampling and adaptive averaging of short dims by one matrix product.

The portable kernels resample a dim of an interpolating upsample by weighted gathers of its
taps, average adaptive windows by ``np.add.reduceat`` and spread their gradients by range
sums. Here a dim short enough for a small dense matrix (`upsample_matrix_size` inputs; an
averaging matrix within `adaptive_matrix_ratio` times the dim's input and output sizes) is
one product with that matrix (`matmul_along`) instead. The matrices hold the reference's
weights, so results differ from it by float reassociation only. The thresholds are in `tuning`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable import adaptive_pooling, backward, upsample
from torchedge.kernels.portable.adaptive_pooling import adaptive_bounds
from torchedge.kernels.registry import register_kernel

__all__ = [
    "interpolate",
    "adaptive_mean_along",
    "adaptive_spread",
    "small_averaging_matrix",
    "averaging_matrix",
    "matmul_along",
]


def interpolate(x: np.ndarray, indices: list, weights: list, axis: int) -> np.ndarray:
    """`upsample.interpolate_by_gathers`, as one product with the dense interpolation matrix
    where dim ``axis`` has at most `upsample_matrix_size` inputs."""
    n = x.shape[axis]
    if n > tuned("upsample_matrix_size"):
        return upsample.interpolate_by_gathers(x, indices, weights, axis)
    m = indices[0].size
    matrix = np.zeros((m, n), x.dtype)
    for index, weight in zip(indices, weights):
        np.add.at(matrix, (np.arange(m), index), weight)
    return matmul_along(x, matrix, axis)


def small_averaging_matrix(size: int, out_size: int) -> bool:
    """Whether the (out_size, size) averaging matrix is within `adaptive_matrix_ratio` times
    the dim's input and output sizes."""
    return size * out_size <= tuned("adaptive_matrix_ratio") * (size + out_size)


def adaptive_mean_along(x: np.ndarray, out_size: int) -> np.ndarray:
    """`adaptive_pooling.adaptive_mean_along`, by the averaging matrix where it is small."""
    n = x.shape[1]
    if small_averaging_matrix(n, out_size):
        return matmul_along(x, averaging_matrix(n, out_size, x.dtype), 1)
    return adaptive_pooling.adaptive_mean_along(x, out_size)


def adaptive_spread(g: np.ndarray, size: int) -> np.ndarray:
    """`backward.adaptive_spread`, by the transposed averaging matrix where it is small."""
    out_size = g.shape[1]
    if small_averaging_matrix(size, out_size):
        return matmul_along(g, averaging_matrix(size, out_size, g.dtype).T, 1)
    return backward.adaptive_spread(g, size)


def matmul_along(x: np.ndarray, matrix: np.ndarray, axis: int) -> np.ndarray:
    """``x`` with dim ``axis`` (of size n) replaced by ``matrix`` (m, n) times it."""
    lead, n, rest = x.shape[:axis], x.shape[axis], x.shape[axis + 1 :]
    if math.prod(rest) == 1:  # the last dim (but for unit dims): one GEMM over all rows
        return (x.reshape(-1, n) @ matrix.T).reshape(lead + (matrix.shape[0],) + rest)
    return (matrix @ x.reshape(lead + (n, math.prod(rest)))).reshape(lead + (matrix.shape[0],) + rest)


@functools.lru_cache(maxsize=256)
def averaging_matrix(size: int, out_size: int, dtype) -> np.ndarray:
    """(out_size, size) matrix whose row i averages the inputs of adaptive window i (read-only)."""
    start, end = adaptive_bounds(size, out_size)
    j = np.arange(size)
    inside = (j >= start[:, None]) & (j < end[:, None])
    matrix = (inside / (end - start)[:, None]).astype(dtype)
    matrix.flags.writeable = False
    return matrix


for _op, _kernel in [
    ("aten::upsample_linear1d.out", upsample.upsample_linear1d),
    ("aten::upsample_bilinear2d.out", upsample.upsample_bilinear2d),
    ("aten::upsample_bilinear2d.vec_out", upsample.upsample_bilinear2d_vec),
    ("aten::upsample_trilinear3d.out", upsample.upsample_trilinear3d),
    ("aten::upsample_bicubic2d.out", upsample.upsample_bicubic2d),
]:
    register_kernel(_op, library="optimized")(functools.partial(_kernel, interpolate=interpolate))

for _dims, _op, _backward in [
    (2, "aten::_adaptive_avg_pool2d.out", "aten::_adaptive_avg_pool2d_backward.out"),
    (3, "aten::_adaptive_avg_pool3d.out", "aten::_adaptive_avg_pool3d_backward.out"),
]:
    register_kernel(_op, library="optimized")(
        functools.partial(adaptive_pooling.adaptive_avg_pool, _op, _dims, mean_along=adaptive_mean_along)
    )
    register_kernel(_backward, library="optimized")(
        functools.partial(backward.adaptive_avg_pool_backward, _backward, _dims, spread=adaptive_spread)
    )
register_kernel("aten::adaptive_avg_pool1d.out", library="optimized")(
    functools.partial(adaptive_pooling.adaptive_avg_pool1d, mean_along=adaptive_mean_along)
)
