"""The Winograd F(2x2, 3x3) convolution path: taken where it should be, exact to float
tolerances against eager in float64, and its transformed kernels cached only for constants.
(Its numerics over dtypes, paddings and batch sizes run in test_nn_core's CONVOLUTIONS.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchedge.kernels.optimized import convolution, convolution_winograd
from torchedge.kernels.optimized.derived_arrays import cached_keys
from torchedge.kernels.registry import get_kernel

_CONV = get_kernel("aten::convolution.out").fn


def _run(x, w, b, padding, dtype=np.float32):
    oh, ow = (s + 2 * p - 2 for s, p in zip(x.shape[2:], padding))
    out = np.empty((x.shape[0], w.shape[0], oh, ow), dtype)
    _CONV(x, w, b, [1, 1], padding, [1, 1], False, [0, 0], 1, out)
    return out


def _eager(x, w, b, padding):
    x, w, b = (None if a is None else torch.from_numpy(np.array(a, np.float64)) for a in (x, w, b))
    return torch.nn.functional.conv2d(x, w, b, padding=padding).numpy()


@pytest.fixture
def calls(monkeypatch):
    """How many convolutions ran through the Winograd path."""
    count = []
    real = convolution.winograd_conv

    def spy(*args):
        count.append(1)
        real(*args)

    monkeypatch.setattr(convolution, "winograd_conv", spy)
    return count


@pytest.mark.parametrize(
    "shape, channels, padding, winograd",
    [
        ((2, 48, 12, 11), 48, [1, 1], True),  # batched, odd output width
        ((1, 64, 13, 13), 56, [2, 0], True),  # unequal padding, odd sizes
        ((1, 32, 20, 20), 32, [1, 1], False),  # too few channels
        ((1, 64, 7, 7), 64, [1, 1], False),  # too few tiles
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_winograd_where_it_pays(calls, shape, channels, padding, winograd, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((channels, shape[1], 3, 3)).astype(dtype)
    b = rng.standard_normal(channels).astype(dtype)
    got = _run(x, w, b, padding, dtype)
    assert bool(calls) == winograd
    want = _eager(x, w, b, padding)
    rtol, atol = (1e-5, 1e-4) if dtype == np.float32 else (1e-12, 1e-11)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_constant_kernels_transformed_once_writable_ones_every_call(calls):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 48, 12, 12)).astype(np.float32)
    constant = rng.standard_normal((48, 48, 3, 3)).astype(np.float32)
    constant.flags.writeable = False
    first = _run(x, constant, None, [1, 1])
    assert (id(constant),) in cached_keys(convolution_winograd._transformed)
    np.testing.assert_array_equal(_run(x, constant, None, [1, 1]), first)
    # a writable kernel changed between calls: the second call sees the change
    weight = constant.copy()
    _run(x, weight, None, [1, 1])
    weight *= 2
    np.testing.assert_allclose(
        _run(x, weight, None, [1, 1]), 2 * _eager(x, constant, None, [1, 1]), rtol=1e-5, atol=2e-4
    )
    assert (id(weight),) not in cached_keys(convolution_winograd._transformed)
    # a read-only view of writable memory is not a constant either
    view = weight[:]
    view.flags.writeable = False
    _run(x, view, None, [1, 1])
    weight /= 2
    np.testing.assert_allclose(_run(x, view, None, [1, 1]), _eager(x, constant, None, [1, 1]), rtol=1e-5, atol=2e-4)
    assert (id(view),) not in cached_keys(convolution_winograd._transformed)
    assert len(calls) == 6


def test_layers_whose_transforms_need_too_much_memory_keep_the_column_methods():
    # 64 channels on 600x600: 16 transformed values per tile and channel would take 369 MB
    weight, x = np.empty((64, 64, 3, 3), np.float32), np.empty((1, 64, 600, 600), np.float32)
    out = np.empty((1, 64, 600, 600), np.float32)
    dtype = np.dtype(np.float32)
    assert not convolution_winograd.winograd_pays(x, weight, (1, 1), (1, 1), 1, (600, 600), out, dtype)
    small, small_out = x[:, :, :56, :56], out[:, :, :56, :56]
    assert convolution_winograd.winograd_pays(small, weight, (1, 1), (1, 1), 1, (56, 56), small_out, dtype)
