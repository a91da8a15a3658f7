"""Small helpers shared by the portable kernels: dims, checks, writing into ``out``."""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import NoReturn

import numpy as np

from torchedge.errors import KernelError
from torchedge.kernels.dtypes import convert

__all__ = [
    "check",
    "fail",
    "wrap_dim",
    "wrap_dims",
    "write",
    "scratch",
    "finish",
    "aliases",
    "check_writable",
    "quiet",
    "as_scalar",
    "pair",
    "row_sums",
]


def check(condition: bool, op: str, message: str) -> None:
    """Raise `KernelError` naming ``op`` unless ``condition`` holds.

    Hot paths write ``if not condition: fail(op, f"...")`` instead, so that the message is
    formatted only when it is raised."""
    if not condition:
        fail(op, message)


def fail(op: str, message: str) -> NoReturn:
    raise KernelError(f"{op}: {message}")


def wrap_dim(dim: int, ndim: int, op: str) -> int:
    """A possibly negative dim as an index in ``[0, ndim)``; a 0-dim tensor accepts 0 and -1."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        fail(op, f"dim {dim} is out of range for a tensor of {ndim} dimension(s) (expected a value in [{-n}, {n - 1}])")
    return dim % n


def wrap_dims(dims, ndim: int, op: str) -> tuple:
    """Reduction dims as sorted axes; ``None`` or an empty list means every dim.

    A 0-dim tensor has no axis to reduce, so its dims (0 or -1) become ``()``.
    """
    if dims is None or len(dims) == 0:
        return tuple(range(ndim))
    axes = [wrap_dim(d, ndim, op) for d in dims]
    check(len(set(axes)) == len(axes), op, f"dim {list(dims)} lists a dimension twice")
    return tuple(sorted(axes)) if ndim > 0 else ()


@functools.lru_cache(maxsize=64)
def _ones_column(length: int, dtype: np.dtype) -> np.ndarray:
    ones = np.ones((length, 1), dtype)
    ones.flags.writeable = False
    return ones


def row_sums(matrix: np.ndarray) -> np.ndarray:
    """The sums along the last axis of ``matrix`` (any leading dims), keeping it as a length-1
    axis: a matrix product with a column of ones (its order of additions is the BLAS's)."""
    return np.matmul(matrix, _ones_column(matrix.shape[-1], matrix.dtype))


def _integer_source(value, dtype: np.dtype):
    """``value`` ready to copy into an integer array of ``dtype``: floating point and complex
    values convert by `convert`, Python ints wrap like C++ (not OverflowError)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value if value.dtype.kind in "biu" else convert(value, dtype)
    if type(value) is int and -(1 << 63) <= value < (1 << 63):
        return np.int64(value).astype(dtype)
    return convert(value, dtype) if isinstance(value, (float, complex)) else value


def write(out: np.ndarray, value) -> None:
    """Copy ``value`` (broadcast, cast like a C++ static_cast, floats to integers by
    `convert`) into ``out`` in place."""
    if out.dtype.kind in "iu":
        value = _integer_source(value, out.dtype)
    try:
        np.copyto(out, value, casting="unsafe")
    except ValueError:  # a program whose out tensor has another shape than the result (a corrupt file)
        shape = list(np.shape(value))
        raise KernelError(f"a result of shape {shape} does not fit the out tensor of shape {list(out.shape)}") from None


def scratch(out: np.ndarray, dtype) -> np.ndarray:
    """``out`` itself when it already has ``dtype``, else a fresh buffer of out's shape."""
    return out if out.dtype == dtype else np.empty(out.shape, dtype)


def finish(out: np.ndarray, buffer: np.ndarray) -> None:
    """Cast a `scratch` buffer into ``out`` (nothing to do when it is ``out``)."""
    if buffer is not out:
        write(out, buffer)


def aliases(out: np.ndarray, self: np.ndarray) -> bool:
    """Whether ``out`` is exactly ``self``'s memory (same start, dtype, shape and strides).

    The compiler updates a buffer in place by passing it as both ``self`` and ``out`` of an
    out variant; scatter-like kernels then leave ``out`` as it is and write only what changes."""
    if out is self:
        return True
    return (
        out.shape == self.shape
        and out.strides == self.strides
        and out.dtype == self.dtype
        and out.__array_interface__["data"][0] == self.__array_interface__["data"][0]
    )


def check_writable(op: str, self: np.ndarray) -> None:
    """An in-place kernel's ``self`` must be writable memory, not a read-only constant."""
    if not self.flags.writeable:
        fail(op, f"self (shape {list(self.shape)}) is read-only and cannot be updated in place")


_RUN = threading.local()  # .quiet: the runtime ignores floating-point warnings for a whole method run
_ALREADY_QUIET = contextlib.nullcontext()


def quiet():
    """IEEE results (inf, nan) without NumPy's warnings, as ATen computes them."""
    return _ALREADY_QUIET if getattr(_RUN, "quiet", False) else np.errstate(all="ignore")


@contextlib.contextmanager
def quiet_run():
    """One `quiet` scope around a whole method run: kernels then skip their own ``np.errstate``
    (entering one per kernel call adds up over a run of small kernels)."""
    if getattr(_RUN, "quiet", False):
        yield
        return
    with np.errstate(all="ignore"):
        _RUN.quiet = True
        try:
            yield
        finally:
            _RUN.quiet = False


def as_scalar(value, dtype):
    """A Python number as a 0-dim array of ``dtype``, wrapping like a C++ cast (`convert`)."""
    return convert(np.asarray(value), dtype)


def pair(values, n: int, name: str, op: str) -> tuple:
    """An ``int[n]`` schema argument (one value stands for all n) as an n-tuple."""
    values = tuple(values)
    if len(values) == 1:
        return values * n
    check(len(values) == n, op, f"{name} must have 1 or {n} values, got {list(values)}")
    return values
