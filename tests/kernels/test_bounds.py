"""Clamping by number bounds (`torchedge.kernels.portable.bounds`): the kernels that use it (relu,
clamp, hardtanh, the fused activations, GELU's clip) give ATen's results on arrays of several
blocks, in place and apart, with nan, infinities and signed zeros, by NumPy's clip where it keeps
ties and by the block-by-block fallback where it does not (forced here)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchedge.kernels.optimized.clamp_rows import bound_row, clamp_into
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable import bounds
from torchedge.kernels.registry import get_kernel

BLOCK = int(tuned("clamp_rows_block"))
SIZE = 2 * BLOCK + 123  # two whole blocks and a partial one


def _values(dtype, zeros: bool) -> np.ndarray:
    x = np.random.default_rng(0).normal(scale=4, size=SIZE).astype(dtype)
    x[[5, BLOCK + 7, 2 * BLOCK + 100]] = [np.nan, np.inf, -np.inf]
    if zeros:
        x[[11, BLOCK + 3]] = [0.0, -0.0]
    return x.reshape(1, -1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("zeros", [False, True], ids=["no-zeros", "signed-zeros"])
@pytest.mark.parametrize("in_place", [False, True], ids=["apart", "in-place"])
@pytest.mark.parametrize(
    "op, args, reference",
    [
        ("aten::relu.out", (), torch.relu),
        ("aten::clamp.out", (-1.5, 2.0), lambda t: torch.clamp(t, -1.5, 2.0)),
        ("aten::clamp.out", (None, -0.0), lambda t: torch.clamp(t, max=-0.0)),
        ("aten::clamp.out", (3.0, 1.0), lambda t: torch.clamp(t, 3.0, 1.0)),  # min > max gives max
        ("aten::hardtanh.out", (-1.0, 1.0), lambda t: torch.nn.functional.hardtanh(t, -1.0, 1.0)),
    ],
    ids=["relu", "clamp", "clamp-max-negative-zero", "clamp-crossed", "hardtanh"],
)
@pytest.mark.parametrize("clip_ties", [True, False], ids=["clip", "fallback"])
def test_clamping_kernels_match_aten_over_several_blocks(
    op, args, reference, dtype, zeros, in_place, clip_ties, monkeypatch
):
    if not clip_ties:
        monkeypatch.setattr(bounds, "clip_keeps_ties", lambda dtype: False)
    x = _values(dtype, zeros)
    expected = reference(torch.from_numpy(x.copy())).numpy()
    out = x if in_place else np.empty_like(x)
    get_kernel(op).fn(x, *args, out)
    np.testing.assert_array_equal(out, expected)  # nan where nan, and equal values
    assert np.array_equal(np.signbit(out), np.signbit(expected)), "a zero has the wrong sign"


def test_clamp_into_refuses_what_it_cannot_do_in_blocks():
    x = np.arange(2 * SIZE, dtype=np.float32)
    assert not clamp_into(x, 0, 1, np.empty(2 * SIZE, np.float64))  # another dtype
    assert not clamp_into(x.reshape(2, -1).T, 0, 1, np.empty((SIZE, 2), np.float32))  # not contiguous
    assert not clamp_into(x[1:], 0, 1, x[:-1])  # overlapping, shifted
    assert not clamp_into(np.arange(SIZE), 0, 1, np.empty(SIZE, np.int64))  # integers
    assert not clamp_into(x, 0, 1, np.empty(10, np.float32))  # too small to gain
    x = np.arange(SIZE, dtype=np.float32)
    out = np.empty(SIZE, np.float32)
    assert clamp_into(x, 2, 6, out)
    np.testing.assert_array_equal(out, np.clip(x, 2, 6))


def test_bound_rows_keep_the_sign_of_zero():
    assert np.signbit(bound_row(-0.0, np.float32)).all()
    assert not np.signbit(bound_row(0.0, np.float32)).any()
    assert not bound_row(1.0, np.float64).flags.writeable


def test_fused_linear_relu_over_several_blocks():
    """The fused kernels' in-place activation on a product larger than one block."""
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(300, 32)).astype(np.float32), rng.normal(size=(32, 130)).astype(np.float32)
    out = np.empty((300, 130), np.float32)
    get_kernel("torchedge_fused::linear_act.out").fn(x, w, None, "relu", out)
    np.testing.assert_allclose(out, torch.relu(torch.from_numpy(x) @ torch.from_numpy(w)).numpy(), atol=1e-5)


def _clip_giving_the_bound_on_ties(x, low, high, out=None):
    result = np.clip(x, low, high, out=out)
    result[x == low] = low  # -0.0 against a 0.0 bound comes out 0.0
    return result


def _clip_dropping_nan(x, low, high, out=None):
    return np.nan_to_num(np.clip(x, low, high, out=out), nan=low)


@pytest.mark.parametrize("wrong_clip", [_clip_giving_the_bound_on_ties, _clip_dropping_nan])
def test_clip_probe_refuses_a_clip_without_atens_ties_or_nan(wrong_clip, monkeypatch):
    bounds.clip_keeps_ties.cache_clear()
    monkeypatch.setattr(bounds, "CLIP", wrong_clip)
    try:
        assert not bounds.clip_keeps_ties(np.dtype(np.float32))
        assert not bounds.clip_keeps_ties(np.dtype(np.float64))
    finally:
        bounds.clip_keeps_ties.cache_clear()
    monkeypatch.undo()
    assert not bounds.clip_keeps_ties(np.dtype(np.float16))  # only float32 and float64 are probed
