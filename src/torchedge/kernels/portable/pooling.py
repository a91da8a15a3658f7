"""2-d and 3-d pooling: max (with ATen's indices), average, adaptive average.

Every window is clipped to the input before anything is read or allocated, so a kernel
costs what its input and output sizes justify whatever its kernel size, stride, padding
or dilation: ``AvgPool2d(1280, ceil_mode=True)`` over a 5x5 map reads 25 values per
channel. Two ways to reduce the windows:

- few taps reach the input (at most `DIRECT_TAPS` per window, the usual 2x2 or 3x3):
  all dims at once, tap by tap, over the flat runs of `Taps` (cache-sized blocks of
  contiguous memory), when its padded layout of the clipped windows stays within a small
  multiple of the input and output;
- otherwise one dim at a time, the last one first (ATen's row-major visiting order, which
  decides the indices of max pooling), with van Herk / Gil-Werman blocks of one window's
  length: every window is a suffix of one block followed by a prefix of the next, both read
  from two running reductions, so a dim costs time linear in its input and output.

Adaptive windows are averaged one dim at a time (the dims that shrink first, so that no
intermediate outgrows the input and output): by a matrix when it is small, otherwise by one
``np.add.reduceat`` over their bounds (they overlap by at most one element).

`range_sums` (contiguous ranges in blocks) and `pool_windows` also serve the backward kernels.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, pair, quiet, write
from torchedge.kernels.portable.windows import Taps, output_size, rows_view, workspace
from torchedge.kernels.registry import register_kernel

__all__ = [
    "max_pool_with_indices",
    "avg_pool",
    "adaptive_avg_pool",
    "pool_geometry",
    "pool_windows",
    "averaging_matrix",
    "small_matrix",
    "adaptive_bounds",
    "pool_divisors",
    "matmul_along",
    "range_sums",
    "map_dims",
    "shrinking_first",
    "batched",
    "check_nonempty",
    "check_window_fits",
]

# Windows reaching at most this many taps of the input are reduced tap by tap, when the
# padded layout of `Taps` holds at most `_DIRECT_LAYOUT` times the input and output elements.
DIRECT_TAPS = 64
_DIRECT_LAYOUT = 4
# Adaptive windows of a dim are averaged by a matrix when it has at most this many times the
# dim's input and output elements.
_ADAPTIVE_MATRIX = 16


def batched(op, x, dims, *outs):
    """Unbatched (C, *spatial) inputs and their outs gain a batch dim; returns the views."""
    check(
        x.ndim in (dims + 1, dims + 2), op, f"expected a {dims + 1}-D or {dims + 2}-D input, got shape {list(x.shape)}"
    )
    return (x, *outs) if x.ndim == dims + 2 else (x[None], *(o[None] for o in outs))


def check_nonempty(op, x, dims: int) -> None:
    """ATen pools only inputs whose channel and spatial dims are non-empty (the batch may be)."""
    check(
        0 not in x.shape[-dims - 1 :],
        op,
        f"expected an input with non-empty dims other than the batch dim, got shape {list(x.shape)}",
    )


def check_window_fits(op, x, dims: int, kernel: tuple) -> None:
    """ATen's 3-d average pooling (only it) refuses inputs smaller than the kernel, padding aside."""
    if dims == 3:
        check(
            all(n >= k for n, k in zip(x.shape[-3:], kernel)),
            op,
            f"input image {list(x.shape[-3:])} is smaller than the kernel size {list(kernel)}",
        )


def pool_geometry(op, x, dims, kernel_size, stride, padding, dilation, ceil_mode):
    """Checked (kernel, stride, padding, dilation, output size) of a pooling window."""
    check_nonempty(op, x, dims)
    kernel = pair(kernel_size, dims, "kernel_size", op)
    stride = pair(stride, dims, "stride", op) if len(stride) else kernel
    padding = pair(padding, dims, "padding", op)
    dilation = pair(dilation, dims, "dilation", op)
    check(
        min(kernel) > 0 and min(stride) > 0 and min(dilation) > 0 and min(padding) >= 0,
        op,
        f"kernel_size {list(kernel)}, stride {list(stride)} and dilation {list(dilation)} must be positive",
    )
    check(
        all(2 * p <= k for p, k in zip(padding, kernel)),
        op,  # ATen's shape check: not the dilated size
        f"padding {list(padding)} must be at most half of the kernel size {list(kernel)}",
    )
    size = tuple(output_size(*args, ceil_mode) for args in zip(x.shape[-dims:], kernel, stride, padding, dilation))
    check(min(size) > 0, op, f"the output size {list(size)} is too small for input {list(x.shape)}")
    return kernel, stride, padding, dilation, size


# -- the windows of one dim ------------------------------------------------------------------


@dataclass(frozen=True)
class _Axis:
    """The windows of one spatial dim clipped to the input: window o reads the input at
    ``start[o] + j * dilation`` for the taps j in ``[lo[o], hi[o])`` (empty when no tap
    reaches the input). ``lo`` and ``hi`` never increase with o."""

    size: int
    kernel: int
    stride: int
    dilation: int
    start: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @property
    def first(self) -> np.ndarray:
        """Each window's first tap at or after the input's start: the index ATen reports for
        a window in which no value beats the lowest one."""
        return self.start + self.lo * self.dilation

    @property
    def taps(self) -> range:
        """The taps some window reads (window 0 reads the last ones, the last window the first)."""
        return range(int(self.lo[-1]), int(self.hi[0]))

    @functools.cached_property
    def blocks(self) -> _Blocks:
        return _blocks(self)


@functools.lru_cache(maxsize=256)
def _axis(size: int, kernel: int, stride: int, padding: int, dilation: int, out_size: int) -> _Axis:
    start = np.arange(out_size, dtype=np.int64) * stride - padding
    lo = np.maximum(0, -start + dilation - 1) // dilation  # first tap at or after position 0
    hi = np.maximum(lo, np.minimum(kernel, (size - start + dilation - 1) // dilation))  # taps before `size`
    return _Axis(size, kernel, stride, dilation, start, lo, hi)


@dataclass(frozen=True)
class _Windows:
    """The clipped windows of every spatial dim, and how to reduce them tap by tap (None:
    one dim at a time, in blocks)."""

    axes: tuple
    direct: _Direct | None

    @functools.cached_property
    def first(self) -> np.ndarray:
        """Flat index of each window's first tap at or after the input's start."""
        return _flat_index([a.first for a in self.axes], tuple(a.size for a in self.axes))


@functools.lru_cache(maxsize=256)
def pool_windows(
    spatial: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, size: tuple
) -> _Windows:
    axes = tuple(_axis(*args) for args in zip(spatial, kernel, stride, padding, dilation, size))
    return _Windows(axes, _direct(axes))


@dataclass(frozen=True)
class _MaxRule:
    """ATen's max pooling visits taps in order and takes one that is larger than the best
    so far, or nan: ties keep the first, several nans the last, and a window in which no
    value beats the lowest one takes none (its index is then its first tap in the input)."""

    lowest: Any
    nan: bool  # whether the input holds a nan (otherwise the nan tests are skipped)

    def beats(self, value: np.ndarray, best: np.ndarray) -> np.ndarray:
        taken = value > best
        return taken | np.isnan(value) if self.nan else taken


# -- all dims at once, tap by tap ------------------------------------------------------------


@dataclass(frozen=True)
class _Direct:
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


def _direct(axes: tuple) -> _Direct | None:
    """The tap-by-tap geometry of ``axes``, or None when it has more than `DIRECT_TAPS` taps
    or its padded layout would be more than `_DIRECT_LAYOUT` times the input and output."""
    if any(len(a.taps) == 0 for a in axes) or math.prod(len(a.taps) for a in axes) > DIRECT_TAPS:
        return None
    out = tuple(len(a.start) for a in axes)
    # One window per dim: any stride will do, and one spanning the window makes every tap a single value.
    stride = tuple(a.stride if o > 1 else a.dilation * (len(a.taps) - 1) + 1 for a, o in zip(axes, out))
    layout = math.prod(
        s * -(-((o - 1) * s + a.dilation * (len(a.taps) - 1) + 1) // s) for a, o, s in zip(axes, out, stride)
    )
    spatial = tuple(a.size for a in axes)
    if layout > _DIRECT_LAYOUT * (math.prod(spatial) + math.prod(out)):
        return None
    first = [a.start + a.taps.start * a.dilation for a in axes]  # the first tap that reaches the input
    base = _flat_index(first, spatial)
    tap_offsets = _flat_index([np.arange(len(a.taps)) * a.dilation for a in axes], spatial).ravel()
    return _Direct(
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


def _max_direct(x: np.ndarray, direct: _Direct, rule: _MaxRule, first_valid: np.ndarray, dtype, out, indices) -> None:
    """Tap by tap over the flat runs of `Taps`, block of rows by block of rows; the tap taken
    is tracked branch-free (taps come in order, so the last one taken is the largest taken)."""
    taps = direct.taps(x, rule.lowest, dtype)
    values = _target(out, taps, dtype)
    where = _target(indices, taps, np.int64)
    block = taps.blocks()[0].stop * taps.pitch
    best = workspace("blocks", (block,), dtype)
    index_type = np.int8 if taps.count < 2**7 else np.int16 if taps.count < 2**15 else np.int64
    which, term = np.empty(block, index_type), np.empty(block, index_type)
    mask, nan = np.empty(block, bool), np.empty(block, bool)
    for rows in taps.blocks():
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


def _sum_direct(x: np.ndarray, direct: _Direct, dtype, divide, out) -> None:
    """Window sums tap by tap over the flat runs of `Taps`, each block divided by ``divide``."""
    taps = direct.taps(x, 0, dtype)
    result = _target(out, taps, dtype)
    total = workspace("blocks", (taps.blocks()[0].stop * taps.pitch,), dtype)
    for rows in taps.blocks():
        block = total[: taps.run_length(rows)]
        np.copyto(block, taps.run(0, rows))
        for t in range(1, taps.count):
            block += taps.run(t, rows)
        divide(taps.grid(block), result[rows])
    _finish(out, result)


# -- one dim at a time, in van Herk / Gil-Werman blocks -------------------------------------


@dataclass(frozen=True)
class _Blocks:
    """Van Herk / Gil-Werman layout of one dim: residue r of the dilation holds the inputs
    r, r + d, r + 2d, ... in a row of ``pitch`` slots (``residues`` rows, then one block of
    padding), cut into blocks of ``block`` slots; slots past the input hold the identity.
    Window o is the suffix scan at slot ``left[o]`` combined with the prefix scan at slot
    ``right[o]`` (a padding slot stands for an empty part)."""

    residues: int
    length: int  # slots of a residue row that can hold an input
    block: int
    pitch: int
    left: np.ndarray
    right: np.ndarray

    def position(self, slot: np.ndarray, dilation: int) -> np.ndarray:
        """The input position a slot holds (slots of the padding give positions past the input)."""
        return slot // self.pitch + slot % self.pitch * dilation


def _blocks(axis: _Axis) -> _Blocks:
    """A window has at most ``block`` taps, so it covers either one whole block, a suffix of
    one block and a prefix of the next, or (clipped) a prefix starting a residue row or a
    suffix ending one; every case is one suffix and one prefix."""
    n, d = axis.size, axis.dilation
    residues, length = min(d, n), -(-n // d)
    block = min(axis.kernel, length)
    pitch = -(-length // block) * block
    residue = axis.start % d
    base = residue * pitch + (axis.start - residue) // d
    a, b = base + axis.lo, base + axis.hi - 1  # the window's first and last slot
    padding = residues * pitch
    empty, same = axis.hi <= axis.lo, a // block == b // block
    left = np.where(empty | (same & (a % block == 0)), padding, a)
    right = np.where(empty | (same & (a % block != 0)), padding, b)
    return _Blocks(residues, length, block, pitch, left, right)


def _laid_out(x: np.ndarray, blocks: _Blocks, dilation: int, identity) -> np.ndarray:
    """(pre, n, post) ``x`` in the slots of `_Blocks`, as (pre, blocks, block, post)."""
    pre, n, post = x.shape
    r, m, pitch = blocks.residues, blocks.length, blocks.pitch
    slots = np.empty((pre, r * pitch + blocks.block, post), x.dtype)
    rows = slots[:, : r * pitch].reshape(pre, r, pitch, post)
    full = (m - 1) * dilation  # the inputs of the complete columns
    rows[:, :, : m - 1] = x[:, :full].reshape(pre, m - 1, dilation, post).transpose(0, 2, 1, 3)[:, :r]
    rows[:, : n - full, m - 1] = x[:, full:]
    rows[:, n - full :, m - 1] = identity
    rows[:, :, m:] = identity
    slots[:, r * pitch :] = identity
    return slots.reshape(pre, -1, blocks.block, post)


def _scans(ufunc, laid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running reductions within each block, from its start (prefix) and from its end (suffix)."""
    return ufunc.accumulate(laid, axis=2), ufunc.accumulate(laid[:, :, ::-1], axis=2)[:, :, ::-1]


def _at(scan: np.ndarray, slots: np.ndarray, block: int) -> np.ndarray:
    """(pre, windows, post) values of a (pre, blocks, block, post) scan at flat slots."""
    return scan[:, slots // block, slots % block]


def _sum_blocks(x: np.ndarray, axis: _Axis) -> tuple[np.ndarray, None]:
    """(pre, n, post) -> (pre, windows, post) window sums."""
    blocks = axis.blocks
    prefix, suffix = _scans(np.add, _laid_out(x, blocks, axis.dilation, 0))
    return _at(suffix, blocks.left, blocks.block) + _at(prefix, blocks.right, blocks.block), None


def range_sums(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(pre, n, post) -> (pre, len(lo), post) sums of ``x[:, lo[i]:hi[i]]`` (zero where empty), in
    blocks: time linear in n and len(lo) however long the ranges."""
    lengths = np.maximum(hi - lo, 0)
    axis = _Axis(x.shape[1], max(int(lengths.max()), 1), 1, 1, lo, np.zeros_like(lo), lengths)
    return _sum_blocks(x, axis)[0]


def _max_blocks(x: np.ndarray, axis: _Axis, rule: _MaxRule) -> tuple[np.ndarray, np.ndarray]:
    """(pre, n, post) -> window maxima and the input positions (along the dim) they come from:
    the prefix scan remembers the last tap it took, the suffix scan the first tap it keeps, and
    a window takes its prefix part when that beats its suffix part."""
    blocks = axis.blocks
    k = blocks.block
    laid = _laid_out(x, blocks, axis.dilation, rule.lowest)
    prefix, suffix = _scans(np.maximum, laid)
    tap = np.arange(k).reshape(1, 1, k, 1)
    before = np.concatenate([np.full_like(prefix[:, :, :1], rule.lowest), prefix[:, :, :-1]], axis=2)
    last_taken = np.maximum.accumulate(np.where(rule.beats(laid, before), tap, 0), axis=2)
    after = np.concatenate([suffix[:, :, 1:], np.full_like(suffix[:, :, :1], rule.lowest)], axis=2)
    first_kept = np.minimum.accumulate(np.where(rule.beats(after, laid), k, tap)[:, :, ::-1], axis=2)[:, :, ::-1]
    left, right = _at(suffix, blocks.left, k), _at(prefix, blocks.right, k)
    slot = np.where(
        rule.beats(right, left),
        (blocks.right // k * k)[:, None] + _at(last_taken, blocks.right, k),
        (blocks.left // k * k)[:, None] + _at(first_kept, blocks.left, k),
    )
    return np.maximum(left, right), blocks.position(slot, axis.dilation)


def _reduce(x: np.ndarray, axes, along) -> tuple[np.ndarray, np.ndarray | None]:
    """Reduce (rows, *spatial) ``x`` over the windows of ``axes`` (one per spatial dim), the last
    dim first, with ``along(x3, axis) -> (values, positions or None)``. With positions, also returns the flat
    spatial index of each window's choice (meaningful where a value was taken)."""
    values, index = x, None
    for d in reversed(range(len(axes))):
        shape = values.shape
        pre, n, post = math.prod(shape[: d + 1]), shape[d + 1], math.prod(shape[d + 2 :])
        result, positions = along(values.reshape(pre, n, post), axes[d])
        reduced = shape[: d + 1] + (result.shape[1],) + shape[d + 2 :]
        if positions is not None:
            np.clip(positions, 0, n - 1, out=positions)  # windows that took nothing: any position in range
            chosen = None if index is None else _gather(index.reshape(pre, n, post), positions)
            positions *= math.prod(x.shape[d + 2 :])
            if chosen is not None:
                positions += chosen
            index = positions.reshape(reduced)
        values = result.reshape(reduced)
    return values, index


def _gather(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``np.take_along_axis(x, positions, axis=1)`` for a contiguous (pre, n, post) ``x``, as one
    flat `np.take` (several times faster)."""
    pre, n, post = x.shape
    flat = positions * post
    flat += np.arange(0, pre * n * post, n * post)[:, None, None] + np.arange(post)
    return np.take(x.reshape(-1), flat)


def _outer(ufunc, arrays: list) -> np.ndarray:
    """``ufunc`` over 1-D arrays spread along one dim each (an outer sum or product)."""
    ndim = len(arrays)
    return functools.reduce(ufunc, [a.reshape((1,) * d + (-1,) + (1,) * (ndim - d - 1)) for d, a in enumerate(arrays)])


def _flat_index(coordinates, spatial) -> np.ndarray:
    """Flat offsets ``sum_d coordinate_d * stride_d`` as an outer sum over the dims."""
    return _outer(np.add, [c * math.prod(spatial[d + 1 :]) for d, c in enumerate(coordinates)])


# -- the kernels -----------------------------------------------------------------------------


def max_pool_with_indices(op, dims, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices):
    """Max over each window; indices are flat offsets into the input's spatial dims, chosen
    by ATen's rule (`_MaxRule`); padding is never taken."""
    x, out, indices = batched(op, self, dims, out, indices)
    check(category(x.dtype) >= 1, op, f"max pooling is not implemented for {x.dtype}")
    kernel, stride, padding, dilation, size = pool_geometry(
        op, x, dims, kernel_size, stride, padding, dilation, ceil_mode
    )
    check(out.shape[-dims:] == size, op, f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}")
    if out.size == 0:
        return
    acc = accumulate_dtype(x.dtype)
    floating = category(acc) >= 2
    rule = _MaxRule(-np.inf if floating else np.iinfo(acc).min, floating and bool(np.isnan(x).any()))
    windows = pool_windows(x.shape[2:], kernel, stride, padding, dilation, size)
    with quiet():
        if windows.direct is not None:
            _max_direct(x, windows.direct, rule, windows.first, acc, out, indices)
            return
        values, index = _reduce(
            x.reshape((-1,) + x.shape[2:]).astype(acc, copy=False),
            windows.axes,
            functools.partial(_max_blocks, rule=rule),
        )
        np.copyto(index, np.broadcast_to(windows.first, index.shape), where=values == rule.lowest)
    write(out, values.reshape(out.shape))
    write(indices, index.reshape(indices.shape))


def avg_pool(op, dims, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out):
    """Window sums divided by ``divisor_override`` or the window size (clipped to the
    padded input, or to the input itself without ``count_include_pad``); integer averages
    truncate toward zero, as in C++."""
    x, out = batched(op, self, dims, out)
    check(x.dtype != np.bool_, op, "average pooling is not implemented for bool")
    check(divisor_override is None or divisor_override != 0, op, "divisor_override must be non-zero")
    kernel, stride, padding, _, size = pool_geometry(op, x, dims, kernel_size, stride, padding, (1,), ceil_mode)
    check_window_fits(op, x, dims, kernel)
    check(out.shape[-dims:] == size, op, f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}")
    if out.size == 0:
        return
    integral = category(x.dtype) < 2
    acc = np.dtype(np.int64) if integral else accumulate_dtype(x.dtype)
    divisor = np.asarray(
        divisor_override or pool_divisors(tuple(x.shape[2:]), kernel, stride, padding, size, count_include_pad)
    ).astype(acc)

    def divide(sums, result):
        if integral:  # C++ integer division truncates toward zero
            result[...] = np.abs(sums) // divisor * np.sign(sums)
        else:
            np.divide(sums, divisor, out=result)

    windows = pool_windows(x.shape[2:], kernel, stride, padding, (1,) * dims, size)
    with quiet():
        if windows.direct is not None:
            _sum_direct(x, windows.direct, acc, divide, out)
            return
        sums, _ = _reduce(x.reshape((-1,) + x.shape[2:]).astype(acc, copy=False), windows.axes, _sum_blocks)
        divide(sums, sums)
    write(out, sums.reshape(out.shape))


@functools.lru_cache(maxsize=256)
def pool_divisors(size, kernel, stride, padding, out_size, count_include_pad) -> np.ndarray:
    """Per-output window size: the window clipped to the padded input, or to the input
    (read-only; the arguments are tuples)."""
    per_dim = []
    for n, k, s, p, o in zip(size, kernel, stride, padding, out_size):
        start = np.arange(o, dtype=np.int64) * s - p
        end = np.minimum(start + k, n + p)
        per_dim.append(end - start if count_include_pad else np.minimum(end, n) - np.maximum(start, 0))
    counts = _outer(np.multiply, per_dim)
    counts.flags.writeable = False
    return counts


def adaptive_avg_pool(op, dims, self, output_size, out):
    """Output cell i averages input cells floor(i*N/O) .. ceil((i+1)*N/O) along each dim."""
    x, out = batched(op, self, dims, out)
    check(category(x.dtype) >= 2, op, f"adaptive average pooling is not implemented for {x.dtype}")
    check_nonempty(op, x, dims)
    size = pair(output_size, dims, "output_size", op)
    check(
        min(size) > 0 and out.shape[-dims:] == size,
        op,
        f"out has spatial shape {list(out.shape[-dims:])}, expected {list(size)}",
    )
    if out.size == 0:
        return
    rows = x.reshape((-1,) + x.shape[2:]).astype(accumulate_dtype(x.dtype), copy=False)
    with quiet():
        means = map_dims(rows, lambda d, y: _adaptive_mean_along(y, size[d]), shrinking_first(x.shape[2:], size))
    write(out, means.reshape(out.shape))


def map_dims(x: np.ndarray, along, order) -> np.ndarray:
    """(rows, *spatial) ``x`` with each spatial dim d, in ``order``, replaced by dim 1 of
    ``along(d, (pre, n, post) view of x)``."""
    for d in order:
        shape = x.shape
        result = along(d, x.reshape(math.prod(shape[: d + 1]), shape[d + 1], math.prod(shape[d + 2 :])))
        x = result.reshape(shape[: d + 1] + (result.shape[1],) + shape[d + 2 :])
    return x


def shrinking_first(size, out_size) -> list:
    """The dims that shrink from ``size`` to ``out_size``, the last first, then those that grow, the
    first first: mapped in this order, no intermediate is larger than both the input and the output."""
    dims = range(len(size))
    return [d for d in reversed(dims) if out_size[d] <= size[d]] + [d for d in dims if out_size[d] > size[d]]


def adaptive_bounds(size: int, out_size: int) -> np.ndarray:
    """(2, out_size): the start and stop of each adaptive window."""
    i = np.arange(out_size)
    return np.stack([i * size // out_size, -((-(i + 1) * size) // out_size)])


def _adaptive_mean_along(x: np.ndarray, out_size: int) -> np.ndarray:
    """(pre, n, post) -> (pre, out_size, post) means of the adaptive windows. A small
    (out_size, n) averaging matrix is one GEMM; otherwise `np.add.reduceat` over the
    interleaved bounds (what lies between a window's stop and the next start, one element
    where they overlap, is dropped). Those stops fall inside the input unless there are more
    windows than inputs; then a padding zero holds the last one."""
    n = x.shape[1]
    if small_matrix(n, out_size):
        return matmul_along(x, averaging_matrix(n, out_size, x.dtype), 1)
    start, stop = adaptive_bounds(n, out_size)
    if out_size > n:
        x = np.concatenate([x, np.zeros_like(x[:, :1])], axis=1)
    sums = np.add.reduceat(x, np.stack([start, stop], 1).reshape(-1)[:-1], axis=1)[:, ::2]
    return np.divide(sums, (stop - start).astype(x.dtype)[:, None], out=sums)


def small_matrix(size: int, out_size: int) -> bool:
    """Whether the (out_size, size) averaging matrix is small enough to multiply by."""
    return size * out_size <= _ADAPTIVE_MATRIX * (size + out_size)


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


# Shape functions, called as ``shape(dims, op, *schema arguments)`` (the registry binds op).
def _check_input(op: str, dims: int, x) -> None:
    check(
        x.ndim in (dims + 1, dims + 2),
        op,
        f"expected a (N, C, *spatial) or (C, *spatial) input of {dims} spatial dims, got shape {list(x.shape)}",
    )


def _max_pool_shape(
    dims: int, op: str, self, kernel_size, stride, padding, dilation, ceil_mode, out, indices
) -> list[tuple]:
    _check_input(op, dims, self)
    *_, size = pool_geometry(op, self, dims, kernel_size, stride, padding, dilation, ceil_mode)
    return [self.shape[:-dims] + size] * 2


def _avg_pool_shape(
    dims: int, op: str, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out
) -> list[tuple]:
    _check_input(op, dims, self)
    kernel, *_, size = pool_geometry(op, self, dims, kernel_size, stride, padding, (1,), ceil_mode)
    check_window_fits(op, self, dims, kernel)
    return [self.shape[:-dims] + size]


def _adaptive_avg_pool_shape(dims: int, op: str, self, output_size, out) -> list[tuple]:
    _check_input(op, dims, self)
    check_nonempty(op, self, dims)
    size = pair(output_size, dims, "output_size", op)
    check(min(size) > 0, op, f"output_size {list(output_size)} must be positive")
    return [self.shape[:-dims] + size]


# op name, kernel ``impl(op, dims, *schema arguments)``, shape function, spatial dims
_POOLS: list[tuple[str, Callable, Callable, int]] = [
    ("aten::max_pool2d_with_indices.out", max_pool_with_indices, _max_pool_shape, 2),
    ("aten::max_pool3d_with_indices.out", max_pool_with_indices, _max_pool_shape, 3),
    ("aten::avg_pool2d.out", avg_pool, _avg_pool_shape, 2),
    ("aten::avg_pool3d.out", avg_pool, _avg_pool_shape, 3),
    ("aten::_adaptive_avg_pool2d.out", adaptive_avg_pool, _adaptive_avg_pool_shape, 2),
    ("aten::_adaptive_avg_pool3d.out", adaptive_avg_pool, _adaptive_avg_pool_shape, 3),
]
for _op, _impl, _shape, _dims in _POOLS:
    register_kernel(_op, shape=functools.partial(_shape, _dims))(functools.partial(_impl, _op, _dims))


def _as_2d(array: np.ndarray) -> np.ndarray:
    """(N, C, L) or (C, L) as a view with a unit height dim: 1-D pooling is 2-D pooling of height 1."""
    return array[..., None, :]


def _avg_pool1d_shape(op: str, self, kernel_size, stride, padding, ceil_mode, count_include_pad, out) -> list[tuple]:
    return _avg_pool_shape(1, op, self, kernel_size, stride, padding, ceil_mode, count_include_pad, None, out)


@register_kernel("aten::avg_pool1d.out", shape=_avg_pool1d_shape)
def avg_pool1d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, out):
    kernel, stride = tuple(kernel_size), tuple(stride) or tuple(kernel_size)
    avg_pool(
        "aten::avg_pool1d.out",
        2,
        _as_2d(self),
        (1, *kernel),
        (1, *stride),
        (0, *padding),
        ceil_mode,
        count_include_pad,
        None,
        _as_2d(out),
    )


@register_kernel("aten::adaptive_avg_pool1d.out", shape=functools.partial(_adaptive_avg_pool_shape, 1))
def adaptive_avg_pool1d(self, output_size, out):
    adaptive_avg_pool("aten::adaptive_avg_pool1d.out", 2, _as_2d(self), (1, *output_size), _as_2d(out))
