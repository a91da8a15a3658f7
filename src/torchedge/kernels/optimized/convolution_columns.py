"""The column-matrix forms of a forward convolution that read the input in place or copy it
in large runs (the general im2col paths stay in `convolution`):

* `patches`: windows that do not overlap (stride >= kernel, no padding or dilation,
  `windows_apart`) are one strided view of the input, copied once;
* `gemm_per_tap`: one GEMM per kernel tap straight on the tap's strided `Taps` view, summed;
* `gemm_per_kernel_column`: with unit stride along the last spatial dim, the taps of a kernel
  row are shifts of one copy; one GEMM per kernel column over channels x kernel rows;
* `depthwise`: one input channel per group, tap by tap on large planes, else a batched
  matrix-vector product per block of rows;
* `depthwise_channels_last`: the same for small output planes of many channels, channels-last.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.optimized.derived_arrays import derived
from torchedge.kernels.optimized.scratch import per_call, scratch
from torchedge.kernels.optimized.taps import Taps, row_blocks, rows_view
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable.common import write

__all__ = [
    "windows_apart",
    "patches",
    "gemm_per_tap",
    "gemm_per_kernel_column",
    "depthwise",
    "channels_last_pays",
    "depthwise_channels_last",
    "sum_taps_channels_last",
]


def windows_apart(spatial, kernel, stride, padding, dilation, size) -> bool:
    """Whether the ``size`` windows over an input of ``spatial`` size lie inside it, unpadded and
    undilated, with no two overlapping (stride >= kernel): then `patches` holds their taps."""
    return not any(padding) and all(
        d == 1 and s >= k and (o - 1) * s + k <= n for n, k, s, d, o in zip(spatial, kernel, stride, dilation, size)
    )


def patches(x, kernel, stride, size, acc) -> np.ndarray:
    """The (N, C, *kernel, *size) columns of an unpadded, undilated convolution: tap ``k`` of the
    window at ``p`` reads ``x[..., p * stride + k]``."""
    spatial = x.strides[2:]
    windows = np.lib.stride_tricks.as_strided(
        x,
        x.shape[:2] + tuple(kernel) + tuple(size),
        x.strides[:2] + spatial + tuple(step * s for step, s in zip(spatial, stride)),
        writeable=False,
    )
    columns = scratch(windows.shape, acc)
    np.copyto(columns, windows, casting="unsafe")
    return columns


def gemm_per_tap(taps: Taps, kernels, bias, out, acc) -> None:
    """``out = sum over taps t of kernels[..., t] @ tap_t (+ bias)`` on whole rows: each tap's
    (rows, length) run view is a strided matrix that BLAS reads in place."""
    groups, og, cg, count = kernels.shape
    n = out.shape[0]
    per_tap = np.ascontiguousarray(np.moveaxis(kernels, 3, 0), dtype=acc)  # (taps, G, O/G, C/G)
    _accumulate_products(
        taps, [(per_tap[t], taps.flat(t).reshape(n, groups, cg, taps.length)) for t in range(count)], bias, out, acc
    )


def gemm_per_kernel_column(taps: Taps, kernels, step: int, bias, out, acc) -> None:
    """`gemm_per_tap` with the taps of one kernel column stacked: with unit stride along the
    last spatial dim, the taps of one kernel row differ by a shift of ``step`` (the dilation),
    so one copy per kernel row, ``step * (width - 1)`` longer than a tap, serves its whole row.
    Then one GEMM per kernel column over channels x kernel rows (a depth BLAS runs faster than
    the channels alone), summed."""
    groups, og, cg, count = kernels.shape
    n, width = out.shape[0], taps.kernel[-1]
    lines, reach = count // width, taps.length + step * (width - 1)
    block = scratch((n, groups, cg, lines, reach), acc)
    for line in range(lines):
        block[:, :, :, line] = taps.flat(line * width, reach - taps.length).reshape(n, groups, cg, reach)
    stacked = block.reshape(n, groups, cg * lines, reach)
    per_column = np.moveaxis(kernels.reshape(groups, og, cg * lines, width), 3, 0)  # (width, G, O/G, C/G * lines)
    per_column = np.ascontiguousarray(per_column, dtype=acc)
    _accumulate_products(
        taps, [(per_column[j], stacked[..., j * step : j * step + taps.length]) for j in range(width)], bias, out, acc
    )


def _accumulate_products(taps: Taps, pairs, bias, out, acc) -> None:
    """``out = sum of a @ b over pairs (+ bias)``, each product (N, G, O/G, length) laid out
    like a run of ``taps``."""
    n, o = out.shape[:2]
    (a, b), *rest = pairs
    shape = b.shape[:2] + (a.shape[-2], b.shape[-1])
    product, partial = scratch(shape, acc), scratch(shape, acc)
    np.matmul(a, b, out=product)
    for a, b in rest:
        np.matmul(a, b, out=partial)
        product += partial
    grid = taps.grid(product.reshape(n * o, taps.length)).reshape(out.shape)
    if bias is None:
        write(out, grid)
    else:
        np.add(grid, bias.reshape((-1,) + (1,) * (out.ndim - 2)), out=out, dtype=acc, casting="unsafe")


def depthwise(taps: Taps, weight, bias, out, acc) -> None:
    """``out[n, c*m + j] = bias + sum_t weight[c*m + j, 0, t] * tap_t[n, c]``: tap by tap on
    large planes (`_depthwise_tap_by_tap`), else a batched matrix product per block of rows
    (where the calls of summing tap by tap would cost more than the arithmetic)."""
    if taps.length >= tuned("depthwise_tap_by_tap_length"):
        _depthwise_tap_by_tap(taps, weight, bias, out, acc)
    else:
        _depthwise_by_product(taps, weight, bias, out, acc)


def _depthwise_tap_by_tap(taps: Taps, weight, bias, out, acc) -> None:
    """Each tap's (rows, length) view read in place, scaled by its weight per row and added to
    a running sum over a block of rows; nothing is copied but the padded input (by `Taps`) and
    the sums into ``out``."""
    n, c = out.shape[0], taps.rows // out.shape[0]
    m, k = weight.shape[0] // c, taps.count
    kernels = np.broadcast_to(weight.reshape(c, m, k).astype(acc), (n, c, m, k)).reshape(taps.rows, m, k)
    biases = None if bias is None else np.broadcast_to(bias.reshape(c, m).astype(acc), (n, c, m)).reshape(taps.rows, m)
    target = rows_view(out, (taps.rows, m) + taps.out_size) if out.dtype == acc else None
    buffer = scratch((taps.rows, m) + taps.out_size, acc) if target is None else target
    blocks = row_blocks(taps.rows, taps.pitch, int(tuned("depthwise_tap_by_tap_block")))
    running, scaling = (scratch((blocks[0].stop, taps.length), acc) for _ in range(2))
    for rows in blocks:
        total, scaled = running[: rows.stop - rows.start], scaling[: rows.stop - rows.start]
        for j in range(m):
            weights = kernels[rows, j]
            np.multiply(taps.flat(0)[rows], weights[:, :1], out=total)
            for t in range(1, k):
                np.multiply(taps.flat(t)[rows], weights[:, t : t + 1], out=scaled)
                total += scaled
            if biases is not None:
                total += biases[rows, j, None]
            buffer[rows, j] = taps.grid(total)
    if target is None:
        write(out, buffer.reshape(out.shape))


def _depthwise_by_product(taps: Taps, weight, bias, out, acc) -> None:
    """`depthwise` block by block: the taps of a block of rows are copied into a (K + 1, rows,
    pitch) column array (the last tap all ones, for the bias) and reduced by one batched matrix
    product per block."""
    n, c = out.shape[0], taps.rows // out.shape[0]
    m, k = weight.shape[0] // c, taps.count  # channel multiplier, taps
    kernels = np.zeros((c, m, k + 1), acc)
    kernels[:, :, :k] = weight.reshape(c, m, k)
    if bias is not None:
        kernels[:, :, k] = bias.reshape(c, m)
    kernels = np.broadcast_to(kernels, (n, c, m, k + 1)).reshape(taps.rows, m, k + 1)
    target = rows_view(out, (taps.rows, m) + taps.out_size) if out.dtype == acc else None
    buffer = scratch((taps.rows, m) + taps.out_size, acc) if target is None else target
    blocks = row_blocks(taps.rows, (k + 1) * taps.pitch, int(tuned("depthwise_product_block")))
    size = blocks[0].stop
    columns = scratch((k + 1, size, taps.pitch), acc)  # tap-major: each tap's run is contiguous
    columns[k] = 1
    result = scratch((m, size, taps.pitch), acc)
    length = taps.length
    for rows in blocks:
        r, run = rows.stop - rows.start, taps.run_length(rows)
        for t in range(k):
            columns[t].reshape(-1)[:run] = taps.run(t, rows)
        np.matmul(
            kernels[rows], columns[:, :r, :length].transpose(1, 0, 2), out=result[:, :r, :length].transpose(1, 0, 2)
        )
        for j in range(m):
            buffer[rows, j] = taps.grid(result[j, :r])
    if target is None:
        write(out, buffer.reshape(out.shape))


def channels_last_pays(channels: int, out_size) -> bool:
    """Whether a 2-D depthwise convolution (multiplier 1) runs faster channels-last: on small
    planes every row of the planar paths is short, each a NumPy loop or BLAS call of its own."""
    return (
        len(out_size) == 2
        and channels >= tuned("channels_last_min_channels")
        and math.prod(out_size) <= tuned("channels_last_max_positions")
    )


def depthwise_channels_last(x, weight, bias, stride, padding, dilation, out, acc) -> None:
    """``out[n, c] = bias[c] + sum over taps t of weight[c, 0, t] * tap_t[n, c]`` for a (N, C, H, W)
    input with one (kh, kw) filter per channel (multiplier 1) and ``padding`` zeros before each
    spatial dim (out's size says how many follow): the input is copied once, channels-last, the
    taps summed by `sum_taps_channels_last` and the sum transposed into ``out``."""
    n, c, h, w = x.shape
    source = scratch((n, h, w, c), acc)
    np.copyto(source, x.transpose(0, 2, 3, 1), casting="unsafe")
    total = scratch((n,) + out.shape[2:] + (c,), acc)
    sum_taps_channels_last(source, weight, stride, padding, dilation, total)
    if bias is not None:
        total += bias.astype(acc, copy=False)
    write(out, total.transpose(0, 3, 1, 2))


@per_call
def sum_taps_channels_last(source, weight, stride, padding, dilation, total) -> None:
    """``total[n, i, j, c] = sum over taps (a, b) of weight[c, 0, a, b] * source[n, s*i + d*a - p,
    s*j + d*b - p, c]`` for a channels-last (N, H, W, C) ``source`` zero-padded by ``padding``
    before each spatial dim (only the taps inside the input are read: nothing is padded), in tap
    order, as the padded sum would be. Each tap is one multiply of a strided view by its weights
    tiled along a row (unit stride: NumPy's inner loop runs over whole rows of channels) and one add."""
    (h, w), (oh, ow), c = source.shape[1:3], total.shape[1:3], source.shape[3]
    kh, kw = weight.shape[2:]
    tiled = derived(_tiled_taps, (weight,), ow, total.dtype)
    scaled = scratch(total.shape, total.dtype)
    started = False
    for t in range(kh * kw):
        a, b = divmod(t, kw)
        top, left = a * dilation[0] - padding[0], b * dilation[1] - padding[1]
        rows, columns = _inside(h, oh, top, stride[0]), _inside(w, ow, left, stride[1])
        if rows.stop <= rows.start or columns.stop <= columns.start:
            continue  # a tap reading padding only
        tap = source[:, _read(rows, top, stride[0]), _read(columns, left, stride[1])]
        weights = tiled[t, : (columns.stop - columns.start) * c].reshape(-1, c)
        if not started:
            _zero_outside(total, rows, columns)
            np.multiply(tap, weights, out=total[:, rows, columns])
            started = True
        else:
            target = scaled[:, rows, columns]
            np.multiply(tap, weights, out=target)
            total[:, rows, columns] += target
    if not started:
        total[...] = 0


def _inside(size: int, out_size: int, offset: int, stride: int) -> slice:
    """The output positions i whose input position ``stride * i + offset`` lies in [0, size)."""
    return slice(max(0, -(offset // stride)), min(out_size, (size - 1 - offset) // stride + 1))


def _read(positions: slice, offset: int, stride: int) -> slice:
    """The input positions that output ``positions`` read at ``offset``."""
    start = stride * positions.start + offset
    return slice(start, start + stride * (positions.stop - positions.start - 1) + 1, stride)


def _zero_outside(total, rows: slice, columns: slice) -> None:
    """Zero ``total`` (N, OH, OW, C) outside [rows, columns]: what the padding adds to the first tap."""
    total[:, : rows.start] = 0
    total[:, rows.stop :] = 0
    total[:, :, : columns.start] = 0
    total[:, :, columns.stop :] = 0


def _tiled_taps(weight, out_width: int, dtype):
    """The (taps, OW * C) weights of a (C, 1, kh, kw) depthwise filter in ``dtype``, each tap's
    channels repeated along a row."""
    per_tap = weight.reshape(weight.shape[0], -1).T
    return np.ascontiguousarray(np.tile(per_tap, (1, out_width)), dtype=dtype)
