"""Pooling tap by tap, all dims at once: the strategies of `torchedge.kernels.optimized.pooling`.

`direct_windows` restricts the clipped windows of `pool_windows` to the taps that reach the
input and lays them out as the flat runs of `Taps`; `max_direct`, `sum_direct` and
`max_values_direct` reduce them one tap at a time, block of rows by block of rows.
`max_values_strided` takes maxima of unpadded windows inside the input over strided views of
the input itself. Maxima follow ATen's rule (`MaxRule`); sums add the taps in row-major order.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from torchedge.kernels.optimized.taps import Taps, rows_view
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable.common import write
from torchedge.kernels.portable.pooling_geometry import flat_index, pool_windows
from torchedge.kernels.portable.pooling_reduction import MaxRule

__all__ = ["Direct", "direct_windows", "max_direct", "sum_direct", "max_values_direct", "max_values_strided"]


@dataclass(frozen=True)
class Direct:
    """The windows restricted to the taps that reach the input, as `Taps` arguments: the
    input cropped where the first such tap lies inside it, the padding left before it, and
    the flat input index of each window's first such tap and of every tap after it."""

    crop: tuple
    kernel: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    base: np.ndarray
    tap_offsets: np.ndarray

    def taps(self, x: np.ndarray, value, dtype) -> Taps:
        return Taps(
            x[(slice(None), slice(None)) + self.crop],
            self.kernel,
            self.stride,
            self.padding,
            self.dilation,
            self.base.shape,
            value,
            dtype,
        )


@functools.lru_cache(maxsize=256)
def direct_windows(
    spatial: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, size: tuple, most_taps, most_layout
) -> Direct | None:
    """The tap-by-tap geometry of the `pool_windows` of these arguments, or None when they have
    more than ``most_taps`` taps or their padded layout would be more than ``most_layout`` times
    the input and output."""
    axes = pool_windows(spatial, kernel, stride, padding, dilation, size).axes
    if any(len(a.taps) == 0 for a in axes) or math.prod(len(a.taps) for a in axes) > most_taps:
        return None
    out = tuple(len(a.start) for a in axes)
    # One window per dim: any stride will do, and one spanning the window makes every tap a single value.
    stride = tuple(a.stride if o > 1 else a.dilation * (len(a.taps) - 1) + 1 for a, o in zip(axes, out))
    layout = math.prod(
        s * -(-((o - 1) * s + a.dilation * (len(a.taps) - 1) + 1) // s) for a, o, s in zip(axes, out, stride)
    )
    spatial = tuple(a.size for a in axes)
    if layout > most_layout * (math.prod(spatial) + math.prod(out)):
        return None
    first = [a.start + a.taps.start * a.dilation for a in axes]  # the first tap that reaches the input
    base = flat_index(first, spatial)
    tap_offsets = flat_index([np.arange(len(a.taps)) * a.dilation for a in axes], spatial).ravel()
    return Direct(
        tuple(slice(max(int(f[0]), 0), None) for f in first),
        tuple(len(a.taps) for a in axes),
        stride,
        tuple(max(-int(f[0]), 0) for f in first),
        tuple(a.dilation for a in axes),
        base,
        tap_offsets,
    )


def _target(out, taps, dtype):
    """``out`` as a (rows, *out_size) view when it has ``dtype``, else a scratch buffer."""
    view = rows_view(out, (taps.rows,) + taps.out_size) if out.dtype == dtype else None
    return view if view is not None else np.empty((taps.rows,) + taps.out_size, dtype)


def _finish(out, buffer) -> None:
    if not np.may_share_memory(out, buffer):
        write(out, buffer.reshape(out.shape))


def max_direct(x: np.ndarray, direct: Direct, rule: MaxRule, first_valid: np.ndarray, dtype, out, indices) -> None:
    """Tap by tap over the flat runs of `Taps`, block of rows by block of rows; the tap taken
    is tracked branch-free (taps come in order, so the last one taken is the largest taken)."""
    taps = direct.taps(x, rule.lowest, dtype)
    values = _target(out, taps, dtype)
    where = _target(indices, taps, np.int64)
    block = taps.blocks(int(tuned("pool_direct_block")))[0].stop * taps.pitch
    best = np.empty(block, dtype)
    index_type = np.int8 if taps.count < 2**7 else np.int16 if taps.count < 2**15 else np.int64
    which, term = np.empty(block, index_type), np.empty(block, index_type)
    mask, nan = np.empty(block, bool), np.empty(block, bool)
    for rows in taps.blocks(int(tuned("pool_direct_block"))):
        length = taps.run_length(rows)
        b, w, m = best[:length], which[:length], mask[:length]
        np.copyto(b, taps.run(0, rows))
        w.fill(0)
        for t in range(1, taps.count):  # which = max(which, taken * t)
            value = taps.run(t, rows)
            np.greater(value, b, out=m)
            if rule.nan:
                m |= np.isnan(value, out=nan[:length])
            np.maximum(b, value, out=b)  # nan propagates, like the rule
            np.multiply(m.view(index_type) if index_type == np.int8 else m, t, out=term[:length])
            np.maximum(w, term[:length], out=w)
        values[rows] = taps.grid(b)
        chosen = direct.base + np.take(direct.tap_offsets, taps.grid(w))
        np.equal(b, rule.lowest, out=m)
        if m.any():
            none = taps.grid(m)
            chosen += none * (first_valid - chosen)
        where[rows] = chosen
    _finish(out, values)
    _finish(indices, where)


def sum_direct(x: np.ndarray, direct: Direct, dtype, divide, out) -> None:
    """Window sums tap by tap over the flat runs of `Taps`, each block divided by ``divide``."""
    _reduce_direct(x, direct, 0, dtype, np.add, divide, out)


def max_values_direct(x: np.ndarray, direct: Direct, lowest, dtype, out) -> None:
    """Window maxima tap by tap, without indices (a nan in a window propagates, as `MaxRule` takes it)."""
    _reduce_direct(x, direct, lowest, dtype, np.maximum, lambda block, result: np.copyto(result, block), out)


def max_values_strided(x: np.ndarray, kernel: tuple, stride: tuple, size: tuple, out) -> None:
    """Window maxima of unpadded windows inside ``x`` (batch, channels, *spatial), each tap a
    strided view of the input: one `np.maximum` per tap, straight into ``out``."""
    for number, tap in enumerate(itertools.product(*(range(k) for k in kernel))):
        view = x[(Ellipsis,) + tuple(slice(t, t + s * (n - 1) + 1, s) for t, s, n in zip(tap, stride, size))]
        if number == 0:
            np.copyto(out, view)
        else:
            np.maximum(out, view, out=out)


def _reduce_direct(x: np.ndarray, direct: Direct, fill, dtype, ufunc, finish, out) -> None:
    """``ufunc`` over every window's taps (the padding reads ``fill``), block of rows by block of
    rows; ``finish(block, result)`` writes each block's reductions into the result."""
    taps = direct.taps(x, fill, dtype)
    result = _target(out, taps, dtype)
    total = np.empty(taps.blocks(int(tuned("pool_direct_block")))[0].stop * taps.pitch, dtype)
    for rows in taps.blocks(int(tuned("pool_direct_block"))):
        block = total[: taps.run_length(rows)]
        np.copyto(block, taps.run(0, rows))
        for t in range(1, taps.count):
            ufunc(block, taps.run(t, rows), out=block)
        finish(taps.grid(block), result[rows])
    _finish(out, result)
