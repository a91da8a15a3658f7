"""The kernel taps of a padded input, laid out so that every tap is a contiguous run.

For tap t, `Taps.run` gives a block of rows as one 1-D slice whose element ``i * pitch + q``
is the value tap t meets in row i's output window at flat position ``q``, where output
position ``(o1, o2, ...)`` sits at ``q = o1 * Q1 + o2 * Q2 + ...`` (the Q are the strides of a
row of the padded input). The positions between output rows are filler that `Taps.grid`
skips. NumPy's ufuncs and copies take such runs as one flat loop, where 2-D or (OH, OW)-shaped
views take one loop per row. With a stride above 1 the padded input is first split into its
stride phases (rows r with the same r % stride together), so that every tap still reads a
contiguous run.

`Taps` allocates its array with ``allocate(shape, dtype)``: fresh arrays by default, the
per-call scratch memory (`torchedge.kernels.optimized.scratch`) in the kernels.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Taps", "row_blocks", "rows_view"]


def row_blocks(rows: int, length: int, elements: int) -> list:
    """Slices over ``rows`` whose (block, length) arrays have about ``elements`` items, so
    that a few of them fit in the cache together."""
    step = max(1, elements // max(length, 1))
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]


def rows_view(out: np.ndarray, shape: tuple):
    """``out`` reshaped to ``shape`` as a view, or None when that would need a copy."""
    view = out.reshape(shape)
    return view if out.size == 0 or np.may_share_memory(view, out) else None


@dataclass(frozen=True)
class _Layout:
    """Where every tap of a window geometry reads, computed once per geometry."""

    phase: tuple  # per-dim length of a stride phase (the padded input, rounded up to strides)
    strides: tuple  # element strides of the output grid in a phase row
    pitch: int  # elements of one row of a phase
    length: int  # elements from a row's first to its last window
    offsets: tuple  # (phase, start) of every tap
    plain: bool  # the input itself serves as the only phase (unit stride, no padding)
    copies: tuple  # (phase, target, source) index tuples filling the phases from the input
    borders: tuple  # (phase, index) slabs of padding


@functools.lru_cache(maxsize=512)
def _layout(size, kernel, stride, padding, dilation, out_size) -> _Layout:
    phase = tuple(-(-((o - 1) * s + d * (k - 1) + 1) // s) for o, s, d, k in zip(out_size, stride, dilation, kernel))
    plain = all(s == 1 for s in stride) and not any(padding) and all(p <= n for p, n in zip(phase, size))
    if plain:
        phase = size
    strides = tuple(math.prod(phase[d + 1 :]) for d in range(len(kernel)))
    length = sum((o - 1) * q for o, q in zip(out_size, strides)) + 1 if min(out_size, default=1) > 0 else 0
    offsets = []
    for tap in itertools.product(*(range(k) for k in kernel)):
        reach = [t * d for t, d in zip(tap, dilation)]
        which = int(np.ravel_multi_index([r % s for r, s in zip(reach, stride)], stride))
        offsets.append((which, sum(r // s * q for r, s, q in zip(reach, stride, strides))))
    copies, borders = [], []
    for which, residues in enumerate(itertools.product(*(range(s) for s in stride))):
        target, source = [slice(None)], [slice(None)]
        for d, (r, s, p, n, length_d) in enumerate(zip(residues, stride, padding, size, phase)):
            first = min(length_d, max(0, -(-(p - r) // s)))  # first phase row holding an input row
            stop = max(first, min(length_d, -(-(n + p - r) // s)))
            edge = (slice(None),) * (d + 1)
            borders += [
                (which, edge + (cut,))
                for cut, empty in ((slice(0, first), first == 0), (slice(stop, None), stop == length_d))
                if not empty
            ]
            target.append(slice(first, stop))
            start = first * s + r - p
            source.append(slice(start, start + (stop - first - 1) * s + 1, s) if stop > first else slice(0, 0))
        copies.append((which, tuple(target), tuple(source)))
    return _Layout(
        tuple(phase), strides, math.prod(phase), length, tuple(offsets), plain, tuple(copies), tuple(borders)
    )


class Taps:
    """Kernel taps of ``x`` (*batch, *spatial), padded with ``value`` and cast to ``dtype``.

    ``rows`` is the product of the batch dims; taps are numbered in row-major kernel order
    (ATen's visiting order). Every row is laid out with the same ``pitch``; `run` serves a
    block of rows as one contiguous 1-D run, whose element ``i * pitch + q`` belongs to row i.
    """

    def __init__(
        self, x, kernel, stride, padding, dilation, out_size, value=0, dtype=None, allocate: Callable = np.empty
    ):
        dims = len(kernel)
        self.dtype = x.dtype if dtype is None else np.dtype(dtype)
        self.kernel, self.out_size = tuple(kernel), tuple(out_size)
        self.rows = math.prod(x.shape[:-dims])
        size = tuple(x.shape[-dims:])
        layout = _layout(size, self.kernel, tuple(stride), tuple(padding), tuple(dilation), self.out_size)
        self.strides, self.pitch, self._offsets = layout.strides, layout.pitch, layout.offsets
        self.length = layout.length if self.rows else 0
        if layout.plain and self.dtype == x.dtype and x.flags.c_contiguous:  # read the input in place
            self._source = x.reshape(1, -1)
        else:
            x = x.reshape((self.rows,) + size)
            phases = allocate((math.prod(stride), self.rows) + layout.phase, self.dtype)
            for which, index in layout.borders:
                phases[which][index] = value
            for which, target, source in layout.copies:
                np.copyto(phases[which][target], x[source], casting="unsafe")
            self._source = phases.reshape(len(phases), -1)
        self._source.flags.writeable = False

    @property
    def count(self) -> int:
        return len(self._offsets)

    def run_length(self, rows: slice) -> int:
        """Length of `run` over ``rows``: whole pitches, the last row cut after its last window."""
        return (rows.stop - rows.start - 1) * self.pitch + self.length

    def run(self, tap: int, rows: slice) -> np.ndarray:
        """Read-only 1-D run of the values tap ``tap`` meets over the given rows."""
        which, start = self._offsets[tap]
        begin = rows.start * self.pitch + start
        return self._source[which, begin : begin + self.run_length(rows)]

    def flat(self, tap: int, extra: int = 0) -> np.ndarray:
        """Read-only (rows, length + extra) view of the values tap ``tap`` meets, and the
        ``extra`` after them (those of a later tap in the same phase, which stay in bounds)."""
        which, start = self._offsets[tap]
        return self._source[which].reshape(self.rows, self.pitch)[:, start : start + self.length + extra]

    def grid(self, buffer: np.ndarray) -> np.ndarray:
        """The (rows, *out_size) view of a (rows, >= pitch) buffer with unit inner stride, or of
        a contiguous 1-D buffer laid out like a `run`."""
        rows, pitch = (
            (buffer.shape[0], buffer.strides[0])
            if buffer.ndim == 2
            else (-(-buffer.size // self.pitch), self.pitch * buffer.itemsize)
        )
        return np.lib.stride_tricks.as_strided(
            buffer, (rows,) + self.out_size, (pitch,) + tuple(q * buffer.itemsize for q in self.strides)
        )

    def blocks(self, elements: int) -> list:
        """`row_blocks` of about ``elements`` items."""
        return row_blocks(self.rows, self.pitch, elements)
