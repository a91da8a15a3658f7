"""Reducing the clipped windows of `pool_windows`: window sums, and window maxima with ATen's
indices.

One dim at a time, the last one first (ATen's row-major visiting order, which decides the
indices of max pooling), with van Herk / Gil-Werman blocks of one window's length: every
window is a suffix of one block followed by a prefix of the next, both read from two running
reductions, so a dim costs time linear in its input and output (`reduce_windows` with
`max_blocks` or `sum_blocks`).

`range_sums` (contiguous ranges in blocks) also serves the backward kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchedge.kernels.portable.pooling_geometry import Axis, Blocks

__all__ = ["MaxRule", "max_blocks", "sum_blocks", "reduce_windows", "range_sums"]


@dataclass(frozen=True)
class MaxRule:
    """ATen's max pooling visits taps in order and takes one that is larger than the best
    so far, or nan: ties keep the first, several nans the last, and a window in which no
    value beats the lowest one takes none (its index is then its first tap in the input)."""

    lowest: Any
    nan: bool  # whether the input holds a nan (otherwise the nan tests are skipped)

    def beats(self, value: np.ndarray, best: np.ndarray) -> np.ndarray:
        taken = value > best
        return taken | np.isnan(value) if self.nan else taken


# -- one dim at a time, in van Herk / Gil-Werman blocks -------------------------------------


def _laid_out(x: np.ndarray, blocks: Blocks, dilation: int, identity) -> np.ndarray:
    """(pre, n, post) ``x`` in the slots of `Blocks`, as (pre, blocks, block, post)."""
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


def sum_blocks(x: np.ndarray, axis: Axis) -> tuple[np.ndarray, None]:
    """(pre, n, post) -> (pre, windows, post) window sums."""
    blocks = axis.blocks
    prefix, suffix = _scans(np.add, _laid_out(x, blocks, axis.dilation, 0))
    return _at(suffix, blocks.left, blocks.block) + _at(prefix, blocks.right, blocks.block), None


def range_sums(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(pre, n, post) -> (pre, len(lo), post) sums of ``x[:, lo[i]:hi[i]]`` (zero where empty), in
    blocks: time linear in n and len(lo) however long the ranges."""
    lengths = np.maximum(hi - lo, 0)
    axis = Axis(x.shape[1], max(int(lengths.max()), 1), 1, 1, lo, np.zeros_like(lo), lengths)
    return sum_blocks(x, axis)[0]


def max_blocks(x: np.ndarray, axis: Axis, rule: MaxRule) -> tuple[np.ndarray, np.ndarray]:
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


def reduce_windows(x: np.ndarray, axes, along) -> tuple[np.ndarray, np.ndarray | None]:
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
    flat `np.take` of flat positions."""
    pre, n, post = x.shape
    flat = positions * post
    flat += np.arange(0, pre * n * post, n * post)[:, None, None] + np.arange(post)
    return np.take(x.reshape(-1), flat)
