"""3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3).

Each 2x2 block of outputs ("tile") comes from a 4x4 block of inputs: ``Y = A^T [U . V] A`` with
``V = B^T d B`` the transformed input block, ``U = G g G^T`` the transformed 3x3 kernel, and
``.`` an elementwise product that, summed over the input channels, is 16 matrix products
(one per element of the 4x4 transform) with 2.25x fewer multiply-adds than the direct method.
B and A hold only 0 and +-1 and G only 0, +-1/2 and 1, so the transforms are sums and
differences (exact scalings), and the result stays within a few ulp of the direct sum.

Layout, chosen so that every NumPy pass runs over long contiguous runs: the zero-padded input
is split by row and column parity into four phase planes whose element ``(i, j)`` is input
``(2i + row_parity, 2j + column_parity)``. Input ``(2ti + a, 2tj + b)`` of tile ``(ti, tj)`` is
then plane ``(a % 2, b % 2)`` at ``(ti + a // 2, tj + b // 2)``: one whole-array shift of a plane
per element of the input block. Every plane row has one more tile than the output needs (the
shifted reads stay in the plane); those junk tiles cost a little GEMM work and are never written.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.optimized.derived_arrays import derived
from torchedge.kernels.optimized.scratch import scratch
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable.elementwise import FAST_FLOATS

__all__ = ["winograd_pays", "winograd_conv"]

# G of F(2x2, 3x3): the 3 kernel taps of a row (or column) -> its 4 transformed values
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def winograd_pays(x, weight, stride, dilation, groups, size, out, acc) -> bool:
    """Whether a convolution is a dense 3x3 stride-1 one with enough channels and tiles for the
    16 products to run near BLAS speed (the thresholds are in `tuning`)."""
    if weight.ndim != 4 or weight.shape[2:] != (3, 3) or groups != 1:
        return False
    if tuple(stride) != (1, 1) or tuple(dilation) != (1, 1):
        return False
    if not (acc in FAST_FLOATS and x.dtype == acc and weight.dtype == acc and out.dtype == acc):
        return False
    tiles = x.shape[0] * -(-size[0] // 2) * -(-size[1] // 2)
    channels = weight.shape[:2]
    # the transformed inputs and the products: 16 values per tile and channel each
    scratch_bytes = 16 * tiles * max(channels) * acc.itemsize
    return (
        min(channels) >= tuned("winograd_min_channels")
        and tiles >= tuned("winograd_min_tiles")
        and scratch_bytes <= tuned("winograd_max_scratch_bytes")
    )


def _transformed(weight) -> np.ndarray:
    """``U = G g G^T`` of every (output, input) kernel: (16, O, C), element ``4a + b`` first."""
    g = weight.astype(np.float64)
    u = np.tensordot(np.tensordot(_G, g, axes=(1, 2)), _G, axes=(3, 1))  # (4, O, C, 4)
    return np.ascontiguousarray(u.transpose(0, 3, 1, 2).reshape(16, *weight.shape[:2]), weight.dtype)


def winograd_conv(x, weight, bias, padding, out) -> None:
    """``out = conv2d(x, weight, bias)`` for a 3x3 kernel, stride 1, zero ``padding`` before
    each spatial dim (after it, whatever ``out``'s size implies), all of one float dtype."""
    n, c, height, width = x.shape
    o = weight.shape[0]
    dtype = x.dtype
    rows_out, cols_out = out.shape[2:]
    th, tw = -(-rows_out // 2), -(-cols_out // 2)  # tiles down and across
    ph, pw = th + 1, tw + 1  # phase plane size: one more tile row and column for the shifts
    plane = n * c * ph * pw
    runs = plane + 1  # the row transforms also serve the column shift of one
    planes = scratch((2, 2, runs + pw), dtype)
    planes.fill(0)
    for a in range(2):
        rows = _parity_span(a, padding[0], height, ph)
        for b in range(2):
            cols = _parity_span(b, padding[1], width, pw)
            if rows is not None and cols is not None:
                target = planes[a, b, :plane].reshape(n, c, ph, pw)
                target[:, :, rows[0], cols[0]] = x[:, :, rows[1], cols[1]]
    # B^T along the rows: row transform k of column parity q, over whole planes (a shift of pw
    # is the next tile row)
    row_t = scratch((4, 2, runs), dtype)
    for q in range(2):
        even, odd = planes[0, q], planes[1, q]
        _b_transpose(even[:runs], odd[:runs], even[pw : pw + runs], odd[pw : pw + runs], row_t[:, q])
    # B along the columns (a shift of 1 is the next tile): V[4a + b], plane-shaped
    v = scratch((4, 4, plane), dtype)
    for k in range(4):
        even, odd = row_t[k, 0], row_t[k, 1]
        _b_transpose(even[:plane], odd[:plane], even[1:runs], odd[1:runs], v[k])
    # the 16 products over the channels, on the tile rows the output needs
    used = th * pw
    columns = v.reshape(16, n, c, ph * pw)[..., :used]
    products = scratch((4, 4, n, o, used), dtype)
    kernels = derived(_transformed, (weight,))
    np.matmul(kernels.reshape(16, 1, o, c), columns, out=products.reshape(16, n, o, used))
    # A^T along the rows, then A along the columns, into each of the four output parities
    sums = scratch((2, 4, n, o, used), dtype)
    for b in range(4):
        _a_transpose(products[:, b], sums[0, b], sums[1, b])
    tiles = scratch((2, n, o, used), dtype)
    shift = None if bias is None else bias.astype(dtype, copy=False).reshape(o, 1, 1)
    for p in range(2):
        _a_transpose(sums[p], tiles[0], tiles[1])
        for q in range(2):
            target = out[:, :, p::2, q::2]
            values = tiles[q].reshape(n, o, th, pw)[:, :, : target.shape[2], : target.shape[3]]
            if shift is None:
                np.copyto(target, values)
            else:
                np.add(values, shift, out=target)


def _b_transpose(d0, d1, d2, d3, out) -> None:
    """B^T of F(2x2, 3x3) over four runs of inputs, into the four rows of ``out``."""
    np.subtract(d0, d2, out=out[0])
    np.add(d1, d2, out=out[1])
    np.subtract(d2, d1, out=out[2])
    np.subtract(d1, d3, out=out[3])


def _a_transpose(m, first, second) -> None:
    """A^T of F(2x2, 3x3) over four runs of products ``m``: ``m0 + m1 + m2`` and ``m1 - m2 - m3``."""
    m0, m1, m2, m3 = m
    np.add(m0, m1, out=first)
    first += m2
    np.subtract(m1, m2, out=second)
    second -= m3


def _parity_span(parity: int, pad: int, size: int, count: int):
    """(plane slice, input slice) of the plane elements ``i < count`` of one parity that hold
    input ``2i + parity - pad`` inside [0, size); None when none do."""
    first = max(0, -(-(pad - parity) // 2))
    last = min(count, (size - 1 + pad - parity) // 2 + 1)
    if first >= last:
        return None
    start = 2 * first + parity - pad
    return slice(first, last), slice(start, start + 2 * (last - first) - 1, 2)
