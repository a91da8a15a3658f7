"""Random tensors: rand, randn, randperm, and dropout's random mask.

The kernels draw from one NumPy generator, which `manual_seed` reseeds; they match
PyTorch's distributions, not its streams of numbers.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, accumulate_dtype, is_floating
from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.portable.shape_rules import from_size, same_as
from torchedge.kernels.registry import register_kernel

__all__ = ["manual_seed", "rand", "randn", "randperm", "native_dropout"]

_GENERATOR = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Make the random kernels' results reproducible."""
    global _GENERATOR
    _GENERATOR = np.random.default_rng(seed)


# Significand bits of each float dtype (std::numeric_limits<T>::digits).
_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _mantissa_digits(dtype) -> int:
    return _DIGITS[np.dtype(dtype).name]


def _check_float_out(op: str, out) -> None:
    """The out of a random kernel drawing floats (`random_distributions` shares it)."""
    if not is_floating(out.dtype):
        fail(op, f"not implemented for dtype {out.dtype}: needs a floating point out")


@register_kernel("aten::rand.out", shape=from_size)
def rand(size, out):
    """Uniform on [0, 1): multiples of 2**-digits, as ATen draws them, so that rounding to
    out's dtype can never reach 1."""
    _check_float_out("aten::rand.out", out)
    digits = _mantissa_digits(out.dtype)
    write(out, np.ldexp(_GENERATOR.integers(0, 1 << digits, out.shape, dtype=np.int64).astype(np.float64), -digits))


@register_kernel("aten::randn.out", shape=from_size)
def randn(size, out):
    _check_float_out("aten::randn.out", out)
    write(out, _GENERATOR.standard_normal(out.shape))


def _randperm_shape(op: str, n, out) -> list[tuple]:
    if n < 0:
        fail(op, f"n must be non-negative, got {n}")
    return [(n,)]


@register_kernel("aten::randperm.out", shape=_randperm_shape)
def randperm(n, out):
    """A random permutation of 0..n-1; every value must be exact in out's dtype."""
    op = "aten::randperm.out"
    (shape,) = _randperm_shape(op, n, out)
    check(out.dtype != BOOL, op, "randperm is not implemented for bool")
    if out.shape != shape:
        fail(op, f"out must have shape [{n}], got {list(out.shape)}")
    if is_floating(out.dtype):
        largest = 2 ** _mantissa_digits(out.dtype)
    else:
        largest = int(np.iinfo(out.dtype).max)
    check(n - 1 <= largest, op, f"n ({n}) is too large for {out.dtype}: {n - 1} must not exceed {largest}")
    write(out, _GENERATOR.permutation(n))


@register_kernel("aten::native_dropout.out", shape=same_as(outs=2))
def native_dropout(input, p, train, out0, out1):
    """Zero each element with probability p and scale the kept ones by 1 / (1 - p); with
    train=False, the input itself and an all-true mask."""
    op = "aten::native_dropout.out"
    if train is False:
        write(out0, input)
        write(out1, True)
        return
    check(is_floating(input.dtype), op, f"needs a floating point input in training, got {input.dtype}")
    check(0 <= p <= 1, op, f"dropout probability must be in [0, 1], got {p}")
    keep = _GENERATOR.random(input.shape) >= p
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    compute = accumulate_dtype(input.dtype)
    with quiet():
        write(out0, input.astype(compute) * keep * compute.type(scale))
    write(out1, keep)
