"""Random tensors of discrete distributions: randint, randint_like, random_, bernoulli with
a float p, and multinomial.

The kernels draw from `random`'s one NumPy generator (see `random_distributions.rng`)
and match PyTorch's distributions and parameter checks, not its streams of numbers. A
``generator`` argument is accepted and ignored: programs carry no generator.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import is_floating
from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.portable.random_distributions import rng, unit_uniform
from torchedge.kernels.portable.shape_rules import same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "randint",
    "randint_low",
    "randint_like",
    "randint_like_low",
    "randint_like_tensor",
    "random",
    "random_to",
    "random_from",
    "bernoulli_float",
    "multinomial",
]

# Significand bits of each float dtype (std::numeric_limits<T>::digits).
_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _limits(dtype) -> tuple[int | float, int | float]:
    """The lowest and the largest value of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return 0, 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    largest = float(np.finfo(np.float32 if dtype.name == "bfloat16" else dtype).max)
    return -largest, largest


def _default_top(dtype) -> int:
    """The largest value ``random_()`` draws: 2**digits for floats (every integer up to it is
    exact), the largest value for integers and bool."""
    dtype = np.dtype(dtype)
    if is_floating(dtype):
        return 1 << _DIGITS[dtype.name]
    return int(_limits(dtype)[1])


def _draw(op: str, low: int, high: int, out: np.ndarray) -> None:
    """Fill ``out`` with integers uniform on [low, high] (both included), each bound
    checked against out's dtype as ATen checks it."""
    lowest, largest = _limits(out.dtype)
    check(lowest <= low <= largest, op, f"from is out of bounds for {out.dtype}")
    check(lowest <= high <= largest, op, f"to - 1 is out of bounds for {out.dtype}")
    values = rng().integers(low, high, out.shape, dtype=np.int64, endpoint=True)
    write(out, values)


def _draw_below(op: str, low: int, high: int, out: np.ndarray) -> None:
    """Integers uniform on [low, high): high is excluded, as in randint and random_(from, to)."""
    check(low < high, op, f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    _draw(op, low, high - 1, out)


def _size_shape(position: int):
    """The rule "the output's shape is the size at argument ``position``"."""

    def shape(op: str, *args) -> list[tuple]:
        size = args[position]
        check(min(size, default=0) >= 0, op, f"size {list(size)} must not be negative")
        return [tuple(size)]

    return shape


@register_kernel("aten::randint.out", shape=_size_shape(1))
def randint(high, size, out):
    """Integers uniform on [0, high), of out's dtype (int64 by default)."""
    _draw_below("aten::randint.out", 0, high, out)


@register_kernel("aten::randint.low_out", shape=_size_shape(2))
def randint_low(low, high, size, out):
    """Integers uniform on [low, high)."""
    _draw_below("aten::randint.low_out", low, high, out)


@register_kernel("aten::randint_like.out", shape=same_as(0))
def randint_like(self, high, memory_format, out):
    _draw_below("aten::randint_like.out", 0, high, out)


@register_kernel("aten::randint_like.low_dtype_out", shape=same_as(0))
def randint_like_low(self, low, high, memory_format, out):
    _draw_below("aten::randint_like.low_dtype_out", low, high, out)


@register_kernel("aten::randint_like.Tensor_out", shape=same_as(0))
def randint_like_tensor(self, high, memory_format, out):
    """randint_like with the upper bound in a one-element integer tensor."""
    op = "aten::randint_like.Tensor_out"
    check(high.size == 1, op, f"high must be a tensor of one element, got shape {list(high.shape)}")
    check(high.dtype.kind in "iu", op, f"high must be an integer tensor, got {high.dtype}")
    _draw_below(op, 0, int(high.reshape(-1)[0]), out)


@register_kernel("aten::random.out", shape=same_as(0))
def random(self, generator, out):
    """Integers uniform on [0, 2**digits] for floats, on [0, largest] for integers and bool."""
    _draw("aten::random.out", 0, _default_top(out.dtype), out)


@register_kernel("aten::random.to_out", shape=same_as(0))
def random_to(self, to, generator, out):
    """Integers uniform on [0, to)."""
    _draw_below("aten::random.to_out", 0, to, out)


@register_kernel("aten::random.from_out", shape=same_as(0))
def random_from(self, from_, to, generator, out):
    """Integers uniform on [from, to), or on [from, random_()'s top] when to is None."""
    op = "aten::random.from_out"
    if to is not None:
        _draw_below(op, from_, to, out)
        return
    top = _default_top(out.dtype)
    check(from_ <= top, op, f"random_ expects 'from' to be at most {top} for {out.dtype}, but got from={from_}")
    _draw(op, from_, top, out)


@register_kernel("aten::bernoulli.float_out", shape=same_as(0))
def bernoulli_float(self, p, generator, out):
    """1 with probability p, else 0, in self's dtype (any dtype, bool included)."""
    op = "aten::bernoulli.float_out"
    check(0 <= p <= 1, op, f"expects p to be in [0, 1], but got p={p}")
    write(out, unit_uniform(out.shape, np.float64) < p)


def _multinomial_shape(op: str, self, num_samples, *rest) -> list[tuple]:
    check(self.ndim in (1, 2), op, f"prob_dist must be 1 or 2 dim, got {self.ndim}")
    check(num_samples > 0, op, f"cannot sample n_sample <= 0 samples (got {num_samples})")
    return [(*self.shape[:-1], num_samples)]


def _check_distribution(op: str, probs: np.ndarray) -> None:
    with quiet():
        valid = bool(np.all((probs >= 0) & (probs < np.inf)))
    check(valid, op, "probability tensor contains either `inf`, `nan` or element < 0")
    check(bool(np.all(probs.sum(-1) > 0)), op, "invalid multinomial distribution (sum of probabilities <= 0)")


def _with_replacement(probs: np.ndarray, num_samples: int) -> np.ndarray:
    """Inverse-CDF draws: the category of u is the number of CDF values <= u. Every row's
    CDF and draws are sorted together, so that one argsort serves all rows."""
    rows, n = probs.shape
    cdf = np.cumsum(probs, axis=-1) / probs.sum(-1, keepdims=True)
    last = n - 1 - np.argmax(probs[:, ::-1] > 0, axis=-1)  # the last category of nonzero weight
    cdf = np.where(np.arange(n) >= last[:, None], 1.0, np.minimum(cdf, 1.0))  # u < 1 never passes it
    u = unit_uniform((rows, num_samples), np.float64)
    order = np.argsort(np.concatenate([cdf, u], axis=-1), axis=-1, kind="stable")  # ties: CDF first
    is_draw = order >= n
    cdf_before = np.cumsum(~is_draw, axis=-1)
    picks = np.empty((rows, num_samples), np.int64)
    row_index = np.broadcast_to(np.arange(rows)[:, None], order.shape)
    picks[row_index[is_draw], order[is_draw] - n] = cdf_before[is_draw]
    return picks


def _without_replacement(probs: np.ndarray, num_samples: int) -> np.ndarray:
    """Sequential draws without replacement, all at once: the categories of the smallest
    E / p, E standard exponential, in increasing order. A zero weight comes only after
    every positive one, as in eager, which draws zero-weight categories rather than fail
    when a row has fewer positive weights than ``num_samples``."""
    with quiet():
        keys = rng().standard_exponential(probs.shape) / probs
    return np.argsort(keys, axis=-1, kind="stable")[:, :num_samples]


@register_kernel("aten::multinomial.out", shape=_multinomial_shape)
def multinomial(self, num_samples, replacement, generator, out):
    """Category indices (int64) drawn from each row of non-negative weights ``self``."""
    op = "aten::multinomial.out"
    _multinomial_shape(op, self, num_samples)
    check(is_floating(self.dtype), op, f"multinomial only supports floating-point dtypes for input, got: {self.dtype}")
    n = self.shape[-1]
    if not replacement:
        check(num_samples <= n, op, "cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    check(n <= 1 << 24, op, f"number of categories cannot exceed 2^24, got {n}")
    probs = self.astype(np.float64).reshape(int(np.prod(self.shape[:-1])), n)
    if probs.shape[0] == 0:
        return
    _check_distribution(op, probs)
    draw = _with_replacement if replacement else _without_replacement
    write(out, draw(probs, num_samples).reshape(out.shape))
