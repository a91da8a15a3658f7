"""Next-token choice from a logits vector: greedy, or seeded sampling with temperature, top-k and top-p."""

from __future__ import annotations

import math
import numbers

import numpy as np

from torchedge.errors import InputError

__all__ = ["Sampler", "greedy"]


def greedy(logits) -> int:
    """The index of the largest logit; ties go to the lowest index, as with ``torch.argmax``."""
    return int(np.argmax(_check_logits(logits)))


class Sampler:
    """Chooses next tokens: greedy at ``temperature=0``, else a draw from the filtered softmax.

    Sampling divides the logits by ``temperature``, keeps the ``top_k`` most likely tokens,
    then the smallest set of those whose cumulative probability reaches ``top_p`` (always at
    least one token), and draws from what is left with a ``numpy.random.Generator`` seeded by
    ``seed``: the same seed gives the same tokens.
    """

    def __init__(
        self, temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None, seed: int | None = None
    ):
        self.temperature = _check_temperature(temperature)
        self.top_k = _check_top_k(top_k)
        self.top_p = _check_top_p(top_p)
        self._rng = np.random.default_rng(_check_seed(seed))

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0

    def __call__(self, logits) -> int:
        if self.is_greedy:
            return greedy(logits)
        cumulative = np.cumsum(self.distribution(logits))
        index = int(np.searchsorted(cumulative, self._rng.random() * cumulative[-1], side="right"))
        return min(index, cumulative.size - 1)

    def distribution(self, logits) -> np.ndarray:
        """The probabilities (float64, one per token) that a sampling step draws from."""
        if self.is_greedy:
            raise InputError("a greedy sampler (temperature 0) has no distribution to draw from")
        scaled = _check_logits(logits).astype(np.float64) / self.temperature
        if np.isneginf(scaled.max()):
            raise InputError("every logit is -inf: there is no token to sample")
        order = np.argsort(-scaled, kind="stable")  # most likely first; ties keep the lowest index first
        if self.top_k is not None:
            order = order[: self.top_k]
        probs = np.exp(scaled[order] - scaled[order[0]])
        probs /= probs.sum()
        if self.top_p is not None:
            keep = int(np.searchsorted(np.cumsum(probs), self.top_p, side="left")) + 1
            order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
        full = np.zeros(scaled.size)
        full[order] = probs
        return full


def _check_logits(logits) -> np.ndarray:
    array = np.asarray(logits)
    if array.dtype.name == "bfloat16":  # ml_dtypes' floats are kind 'V': widened exactly
        array = array.astype(np.float32)
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "fiu":
        raise InputError(f"logits must be a non-empty 1-D array of real numbers, got {array.dtype}{list(array.shape)}")
    if array.dtype.kind == "f" and np.isnan(array).any():
        raise InputError(f"logits contain NaN (at index {int(np.flatnonzero(np.isnan(array))[0])})")
    return array


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_temperature(value) -> float:
    if not _is_real(value) or not math.isfinite(value) or value < 0:
        raise InputError(f"temperature must be a finite number >= 0 (0 means greedy), got {value!r}")
    return float(value)


def _check_top_k(value) -> int | None:
    if value is not None and (not _is_int(value) or value < 1):
        raise InputError(f"top_k must be an integer >= 1 or None, got {value!r}")
    return None if value is None else int(value)


def _check_top_p(value) -> float | None:
    if value is not None and (not _is_real(value) or not 0 < value <= 1):
        raise InputError(f"top_p must be a number in (0, 1] or None, got {value!r}")
    return None if value is None else float(value)


def _check_seed(value) -> int | None:
    if value is not None and (not _is_int(value) or value < 0):
        raise InputError(f"seed must be an integer >= 0 or None, got {value!r}")
    return None if value is None else int(value)
