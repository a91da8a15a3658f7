"""Sampling: greedy ties, hand-computed filtered distributions, seeded draws, argument checks."""

import numpy as np
import pytest

from torchedge.errors import InputError
from torchedge.generation import Sampler, greedy

PROBS = np.array([0.5, 0.3, 0.2])
LOGITS = np.log(PROBS)


def test_greedy_is_argmax_with_ties_to_the_lowest_index():
    assert greedy([0.1, 3.0, -2.0]) == 1
    assert greedy([1.0, 3.0, 3.0, 3.0]) == 1
    assert greedy(np.array([-np.inf, -np.inf, 0.0], np.float32)) == 2
    assert greedy(np.array([4, 7, 7], np.int64)) == 1


def test_temperature_zero_is_greedy_whatever_the_seed_or_filters():
    for seed in (0, 1, 2):
        assert Sampler(0.0, top_k=2, top_p=0.5, seed=seed)([0.0, 2.0, 2.0, 1.0]) == 1


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(temperature=1.0), PROBS),
        (dict(temperature=2.0), np.sqrt(PROBS) / np.sqrt(PROBS).sum()),
        (dict(temperature=0.5), PROBS**2 / (PROBS**2).sum()),
        (dict(temperature=1.0, top_k=1), [1.0, 0.0, 0.0]),
        (dict(temperature=1.0, top_k=2), [0.625, 0.375, 0.0]),
        (dict(temperature=1.0, top_k=5), PROBS),
        (dict(temperature=1.0, top_p=0.4), [1.0, 0.0, 0.0]),  # 0.5 alone reaches 0.4
        (dict(temperature=1.0, top_p=0.75), [0.625, 0.375, 0.0]),  # 0.5 + 0.3 reaches 0.75
        (dict(temperature=1.0, top_p=0.81), PROBS),
        (dict(temperature=1.0, top_p=1.0), PROBS),
        (dict(temperature=1.0, top_p=1e-9), [1.0, 0.0, 0.0]),  # always at least one token
        (dict(temperature=1.0, top_k=2, top_p=0.6), [1.0, 0.0, 0.0]),  # top-p over the top-k renormalised: 0.625
        (dict(temperature=1.0, top_k=2, top_p=0.7), [0.625, 0.375, 0.0]),
    ],
)
def test_filtered_distribution_matches_hand_computation(kwargs, expected):
    np.testing.assert_allclose(Sampler(**kwargs).distribution(LOGITS), expected, atol=1e-12)


def test_order_of_logits_does_not_matter():
    permuted = Sampler(1.0, top_p=0.75).distribution(LOGITS[[2, 0, 1]])
    np.testing.assert_allclose(permuted, [0.0, 0.625, 0.375], atol=1e-12)


def test_top_k_ties_keep_the_lowest_index():
    np.testing.assert_array_equal(Sampler(1.0, top_k=1).distribution([1.0, 2.0, 2.0, 0.0]), [0, 1, 0, 0])


def test_masked_tokens_get_no_probability():
    np.testing.assert_allclose(Sampler(1.0).distribution([-np.inf, 0.0, -np.inf, 0.0]), [0, 0.5, 0, 0.5])


def _draws(sampler, logits, n):
    return np.array([sampler(logits) for _ in range(n)])


def test_same_seed_same_tokens_other_seed_other_tokens():
    logits = np.zeros(50)
    first, again, other = (_draws(Sampler(1.0, seed=s), logits, 40) for s in (7, 7, 8))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_draw_frequencies_follow_the_distribution():
    counts = np.bincount(_draws(Sampler(1.0, seed=0), LOGITS, 20000), minlength=3) / 20000
    np.testing.assert_allclose(counts, PROBS, atol=0.01)  # a fixed seed: the same counts every run


@pytest.mark.parametrize(
    "kwargs, allowed", [(dict(top_k=2), {0, 1}), (dict(top_p=0.75), {0, 1}), (dict(top_p=0.4), {0})]
)
def test_filtered_tokens_are_never_drawn(kwargs, allowed):
    drawn = set(_draws(Sampler(1.0, seed=3, **kwargs), LOGITS, 2000).tolist())
    assert drawn == allowed


def test_high_temperature_flattens_and_low_temperature_sharpens():
    hot = np.bincount(_draws(Sampler(100.0, seed=1), LOGITS, 6000), minlength=3) / 6000
    cold = np.bincount(_draws(Sampler(0.05, seed=1), LOGITS, 6000), minlength=3) / 6000
    np.testing.assert_allclose(hot, 1 / 3, atol=0.03)
    assert cold[0] > 0.99


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(temperature=-1.0), "temperature"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(temperature="hot"), "temperature"),
        (dict(temperature=True), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_k=1.5), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(seed=-1), "seed"),
        (dict(seed="abc"), "seed"),
    ],
)
def test_bad_arguments_are_input_errors(kwargs, message):
    with pytest.raises(InputError, match=message):
        Sampler(**kwargs)


@pytest.mark.parametrize(
    "logits, message",
    [
        (np.zeros((2, 3)), "1-D"),
        (np.zeros(0), "non-empty"),
        (np.array(["a", "b"]), "real numbers"),
        (np.array([0.0, np.nan]), "NaN .at index 1"),
    ],
)
def test_bad_logits_are_input_errors(logits, message):
    with pytest.raises(InputError, match=message):
        greedy(logits)
    with pytest.raises(InputError, match=message):
        Sampler(1.0, seed=0)(logits)


def test_all_masked_logits_cannot_be_sampled():
    with pytest.raises(InputError, match="every logit is -inf"):
        Sampler(1.0)([-np.inf, -np.inf])


def test_bfloat16_logits_sample_as_their_float32_values():
    """A bfloat16 program's logits (ml_dtypes) are widened exactly, not refused."""
    import ml_dtypes

    logits = np.array([0.5, 3.0, -1.0, 2.0], dtype=ml_dtypes.bfloat16)
    assert greedy(logits) == 1
    widened = logits.astype(np.float32)
    for seed in range(3):
        assert Sampler(0.8, top_k=3, seed=seed)(logits) == Sampler(0.8, top_k=3, seed=seed)(widened)
    np.testing.assert_array_equal(Sampler(0.8).distribution(logits), Sampler(0.8).distribution(widened))
