"""`max_pool_values`: the values of max pooling without its indices (what the runtime runs for a
program that never reads them), against PyTorch eager on every strategy it can take.

Three strategies: unpadded windows inside the input as strided views of it (one maximum per
tap), tap by tap over the flat runs of the padded layout, and one dim at a time in blocks; the
fixture forces each in turn. nan anywhere in a window makes the window nan, -inf and padding
are never taken over a real value, integer and half dtypes keep their dtype.
"""

import numpy as np
import pytest
import torch

from torchedge.kernels.optimized import pooling, tuning
from torchedge.kernels.optimized.pooling import max_pool_values

_RNG = np.random.default_rng(11)


@pytest.fixture(params=["strided", "direct", "blocks"])
def strategy(request):
    names = {"strided": (), "direct": ("pool_strided_taps",), "blocks": ("pool_strided_taps", "pool_direct_taps")}
    for name in names[request.param]:
        tuning.set_tuning(name, 0)
    yield request.param
    for name in names[request.param]:
        tuning.set_tuning(name, None)


def _check(x: torch.Tensor, dims: int, kernel, stride, padding, dilation, ceil_mode) -> None:
    pool = torch.nn.functional.max_pool2d if dims == 2 else torch.nn.functional.max_pool3d
    want = pool(x, kernel, stride or None, padding, dilation, ceil_mode)
    out = np.full(tuple(want.shape), 7, x.numpy().dtype)
    op = f"aten::max_pool{dims}d_with_indices.out"
    max_pool_values(op, dims, x.numpy(), kernel, stride, padding, dilation, ceil_mode, out)
    np.testing.assert_array_equal(out, want.numpy())


_CONFIGS_2D = [
    ([2, 2], [2, 2], [0, 0], [1, 1], False),  # the CNNs' 2x2 pool: strided views
    ([2, 2], [], [0, 0], [1, 1], False),  # stride defaults to the kernel
    ([3, 3], [2, 2], [1, 1], [1, 1], False),  # resnet's stem pool: padded
    ([3, 2], [2, 3], [1, 1], [1, 1], True),
    ([3, 3], [2, 2], [1, 0], [2, 2], True),  # dilated
    ([3, 3], [3, 3], [0, 0], [1, 1], True),  # ceil mode: a last window past the input
    ([3, 3], [1, 1], [0, 0], [1, 1], False),  # overlapping windows
]


@pytest.mark.parametrize("config", _CONFIGS_2D, ids=[str(c) for c in _CONFIGS_2D])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int32, torch.uint8])
def test_values_match_eager(strategy, config, dtype):
    x = torch.from_numpy(_RNG.normal(0, 40, (2, 3, 9, 10))).to(dtype)
    if dtype in (torch.int32, torch.uint8):  # eager pools integers only through the indices kernel
        want = torch.ops.aten.max_pool2d_with_indices(x, *config)[0]
        out = np.empty(tuple(want.shape), x.numpy().dtype)
        max_pool_values("aten::max_pool2d_with_indices.out", 2, x.numpy(), *config, out)
        np.testing.assert_array_equal(out, want.numpy())
    else:
        _check(x, 2, *config)


@pytest.mark.parametrize("config", _CONFIGS_2D[:3], ids=[str(c) for c in _CONFIGS_2D[:3]])
def test_nan_and_infinities(strategy, config):
    x = torch.full((1, 2, 6, 7), -torch.inf)
    x[0, 0, 1, 1] = torch.nan
    x[0, 0, 4, 5] = torch.inf
    x[0, 1, 2, 2] = 3.0
    x[0, 1, 3, 3] = torch.nan
    _check(x, 2, *config)


def test_unbatched_and_3d(strategy):
    _check(torch.randn(3, 8, 8, dtype=torch.float64), 2, [2, 2], [2, 2], [0, 0], [1, 1], False)
    x = torch.randn(1, 2, 6, 7, 8)
    _check(x, 3, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False)
    _check(x, 3, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], True)


def test_values_equal_the_indices_kernel(strategy):
    """Same values as the kernel with indices on the same (random, tie-rich) input."""
    x = _RNG.integers(-3, 3, (2, 4, 11, 12)).astype(np.float32)
    for config in _CONFIGS_2D:
        with_indices = pooling.max_pool_with_indices
        want = torch.ops.aten.max_pool2d_with_indices(torch.from_numpy(x), *config)[0].numpy()
        values, indices = np.empty_like(want), np.empty(want.shape, np.int64)
        with_indices("aten::max_pool2d_with_indices.out", 2, x, *config, values, indices)
        out = np.empty_like(want)
        max_pool_values("aten::max_pool2d_with_indices.out", 2, x, *config, out)
        np.testing.assert_array_equal(out, values)
