"""Random tensors of continuous distributions: uniform, normal, exponential, Cauchy,
log-normal, geometric, Poisson, and the ``*_like`` fills.

Like `random`, the kernels draw from its one NumPy generator (which `manual_seed`
reseeds) and match PyTorch's distributions and parameter checks, not its streams of
numbers. A ``generator`` argument is accepted and ignored: programs carry no generator.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable import random as _random
from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.portable.shape_rules import broadcast_inputs, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "rng",
    "unit_uniform",
    "uniform",
    "rand_like",
    "randn_like",
    "normal_tensor_tensor",
    "normal_tensor_float",
    "normal_float_tensor",
    "normal_float_float",
    "normal",
    "exponential",
    "cauchy",
    "log_normal",
    "geometric",
    "poisson",
]


def rng() -> np.random.Generator:
    """The random kernels' shared generator (looked up on each call: `manual_seed` replaces it)."""
    return _random._GENERATOR


# Significand bits of each float dtype (std::numeric_limits<T>::digits).
_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def unit_uniform(shape: tuple, dtype) -> np.ndarray:
    """Uniform on [0, 1) in float64: multiples of 2**-digits of ``dtype``, as ATen draws them."""
    digits = _DIGITS.get(np.dtype(dtype).name, 53)
    return np.ldexp(rng().integers(0, 1 << digits, shape, dtype=np.int64).astype(np.float64), -digits)


_check_float = _random._check_float_out


def _finite_max(dtype) -> float:
    return float(np.finfo(np.float32).max if np.dtype(dtype).name == "bfloat16" else np.finfo(dtype).max)


def _write(out: np.ndarray, value: np.ndarray) -> None:
    with quiet():
        write(out, value)


@register_kernel("aten::uniform.out", shape=same_as(0))
def uniform(self, from_, to, generator, out):
    """Uniform on [from, to)."""
    op = "aten::uniform.out"
    _check_float(op, out)
    largest = _finite_max(out.dtype)
    check(-largest <= from_ <= largest, op, f"from is out of bounds for {out.dtype}, got from={from_}")
    check(-largest <= to <= largest, op, f"to is out of bounds for {out.dtype}, got to={to}")
    check(from_ <= to, op, f"expects to return a [from, to) range, but found from={from_} > to={to}")
    check(
        to - from_ <= largest, op, f"expects to - from <= the largest {out.dtype}, but found to={to} and from={from_}"
    )
    with quiet():
        write(out, from_ + (to - from_) * unit_uniform(out.shape, out.dtype))


@register_kernel("aten::rand_like.out", shape=same_as(0))
def rand_like(self, memory_format, out):
    _check_float("aten::rand_like.out", out)
    _write(out, unit_uniform(out.shape, out.dtype))


@register_kernel("aten::randn_like.out", shape=same_as(0))
def randn_like(self, memory_format, out):
    _check_float("aten::randn_like.out", out)
    _write(out, rng().standard_normal(out.shape))


def _normal(op: str, mean, std, out: np.ndarray) -> None:
    """mean + std * N(0, 1), the parameters broadcast to out's shape."""
    _check_float(op, out)
    if isinstance(std, np.ndarray):
        with quiet():
            bad = np.any(~(std.astype(np.float64) >= 0))  # NaN fails too
        check(not bad, op, "expects all elements of std >= 0.0")
    else:
        check(std >= 0, op, f"expects std >= 0.0, but found std {std}")
    mean = mean.astype(np.float64) if isinstance(mean, np.ndarray) else mean
    std = std.astype(np.float64) if isinstance(std, np.ndarray) else std
    with quiet():
        write(out, mean + std * rng().standard_normal(out.shape))


@register_kernel("aten::normal.Tensor_Tensor_out", shape=broadcast_inputs)
def normal_tensor_tensor(mean, std, generator, out):
    _normal("aten::normal.Tensor_Tensor_out", mean, std, out)


@register_kernel("aten::normal.Tensor_float_out", shape=same_as(0))
def normal_tensor_float(mean, std, generator, out):
    _normal("aten::normal.Tensor_float_out", mean, std, out)


@register_kernel("aten::normal.float_Tensor_out", shape=same_as(1))
def normal_float_tensor(mean, std, generator, out):
    _normal("aten::normal.float_Tensor_out", mean, std, out)


def _float_float_shape(op: str, mean, std, size, *rest) -> list[tuple]:
    check(min(size, default=0) >= 0, op, f"size {list(size)} must not be negative")
    return [tuple(size)]


@register_kernel("aten::normal.float_float_out", shape=_float_float_shape)
def normal_float_float(mean, std, size, generator, out):
    _normal("aten::normal.float_float_out", mean, std, out)


@register_kernel("aten::normal.out", shape=same_as(0))
def normal(self, mean, std, generator, out):
    """self's shape filled with N(mean, std**2) (the out variant of ``normal_functional``)."""
    _normal("aten::normal.out", mean, std, out)


@register_kernel("aten::exponential.out", shape=same_as(0))
def exponential(self, lambd, generator, out):
    """Exponential with rate lambd: -log(1 - u) / lambd."""
    op = "aten::exponential.out"
    _check_float(op, out)
    check(lambd > 0, op, f"expects lambda > 0.0, but found lambda={lambd}")
    with quiet():
        write(out, rng().standard_exponential(out.shape) / lambd)


@register_kernel("aten::cauchy.out", shape=same_as(0))
def cauchy(self, median, sigma, generator, out):
    """Cauchy: median + sigma * tan(pi * (u - 1/2))."""
    op = "aten::cauchy.out"
    _check_float(op, out)
    check(sigma > 0, op, f"expects sigma > 0.0, but found sigma={sigma}")
    with quiet():
        write(out, median + sigma * np.tan(np.pi * (unit_uniform(out.shape, np.float64) - 0.5)))


@register_kernel("aten::log_normal.out", shape=same_as(0))
def log_normal(self, mean, std, generator, out):
    """exp(N(mean, std**2)): mean and std are those of the underlying normal."""
    op = "aten::log_normal.out"
    _check_float(op, out)
    check(std > 0, op, f"expects std > 0.0, but found std={std}")
    with quiet():
        write(out, np.exp(mean + std * rng().standard_normal(out.shape)))


@register_kernel("aten::geometric.out", shape=same_as(0))
def geometric(self, p, generator, out):
    """Number of Bernoulli(p) trials up to the first success: integers >= 1, in self's dtype."""
    op = "aten::geometric.out"
    check(out.dtype != np.bool_, op, "not implemented for dtype bool")
    check(0 < p < 1, op, f"expects p to be in (0, 1), but got p={p}")
    _write(out, rng().geometric(p, out.shape))


@register_kernel("aten::poisson.out", shape=same_as(0))
def poisson(self, generator, out):
    """Poisson counts of rates ``self`` (non-negative), as floats of self's dtype."""
    op = "aten::poisson.out"
    _check_float(op, out)
    rates = np.broadcast_to(self.astype(np.float64), out.shape)
    with quiet():
        valid = bool(np.all((rates >= 0) & (rates < np.inf)))
    if not valid:
        fail(op, "invalid Poisson rate, expected rate to be non-negative and finite")
    # NumPy refuses rates past ~9e18. Past 1e15 the counts are N(rate, rate) rounded: their
    # skewness, 1 / sqrt(rate), is below 3e-8.
    huge = rates > 1e15
    counts = rng().poisson(np.where(huge, 0.0, rates)).astype(np.float64)
    _write(out, np.where(huge, np.round(rates + np.sqrt(rates) * rng().standard_normal(out.shape)), counts))
