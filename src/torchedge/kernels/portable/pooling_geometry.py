"""The windows of a pooling op, clipped to the input, and how they are laid out to be reduced.

`pool_geometry` checks a pool's arguments as ATen does and sizes its output; `pool_windows`
clips every window to the input before anything is read or allocated (`Axis`, one per
spatial dim), so a pool costs what its input and output sizes justify whatever its kernel
size, stride, padding or dilation. The windows are reduced one dim at a time, in van Herk /
Gil-Werman blocks of one window's length (`Blocks`): every window is a suffix of one block
followed by a prefix of the next (`torchedge.kernels.portable.pooling_reduction`).

The argument checks, `pool_divisors` and `pool_windows` also serve the backward kernels.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from torchedge.kernels.portable.common import check, pair
from torchedge.kernels.portable.windows import output_size

__all__ = [
    "Axis",
    "Blocks",
    "pool_geometry",
    "pool_windows",
    "pool_divisors",
    "flat_index",
    "batched",
    "as_2d",
    "check_input",
    "check_nonempty",
    "check_window_fits",
]


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


def check_input(op: str, dims: int, x) -> None:
    """The input check of the shape functions: (N, C, *spatial) or (C, *spatial)."""
    check(
        x.ndim in (dims + 1, dims + 2),
        op,
        f"expected a (N, C, *spatial) or (C, *spatial) input of {dims} spatial dims, got shape {list(x.shape)}",
    )


def as_2d(array: np.ndarray) -> np.ndarray:
    """(N, C, L) or (C, L) as a view with a unit height dim: 1-D pooling is 2-D pooling of height 1."""
    return array[..., None, :]


# -- the windows of one dim ------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
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
    def blocks(self) -> Blocks:
        return _blocks(self)


@functools.lru_cache(maxsize=256)
def _axis(size: int, kernel: int, stride: int, padding: int, dilation: int, out_size: int) -> Axis:
    start = np.arange(out_size, dtype=np.int64) * stride - padding
    lo = np.maximum(0, -start + dilation - 1) // dilation  # first tap at or after position 0
    hi = np.maximum(lo, np.minimum(kernel, (size - start + dilation - 1) // dilation))  # taps before `size`
    return Axis(size, kernel, stride, dilation, start, lo, hi)


@dataclass(frozen=True)
class _Windows:
    """The clipped windows of every spatial dim."""

    axes: tuple

    @functools.cached_property
    def first(self) -> np.ndarray:
        """Flat index of each window's first tap at or after the input's start."""
        return flat_index([a.first for a in self.axes], tuple(a.size for a in self.axes))


@functools.lru_cache(maxsize=256)
def pool_windows(
    spatial: tuple, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, size: tuple
) -> _Windows:
    axes = tuple(_axis(*args) for args in zip(spatial, kernel, stride, padding, dilation, size))
    return _Windows(axes)


# -- one dim at a time, in van Herk / Gil-Werman blocks -------------------------------------


@dataclass(frozen=True)
class Blocks:
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


def _blocks(axis: Axis) -> Blocks:
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
    return Blocks(residues, length, block, pitch, left, right)


def _outer(ufunc, arrays: list) -> np.ndarray:
    """``ufunc`` over 1-D arrays spread along one dim each (an outer sum or product)."""
    ndim = len(arrays)
    return functools.reduce(ufunc, [a.reshape((1,) * d + (-1,) + (1,) * (ndim - d - 1)) for d, a in enumerate(arrays)])


def flat_index(coordinates, spatial) -> np.ndarray:
    """Flat offsets ``sum_d coordinate_d * stride_d`` as an outer sum over the dims."""
    return _outer(np.add, [c * math.prod(spatial[d + 1 :]) for d, c in enumerate(coordinates)])


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
