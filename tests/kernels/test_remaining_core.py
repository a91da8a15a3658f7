"""The last core operators: 1-D average pools and the symbolic/resize prim ops, against eager."""

import numpy as np
import pytest
import torch

from torchedge.kernels.registry import get_kernel

POOL_ARGS = [((3,), (2,), (1,), False, True), ((4,), (), (0,), True, False), ((3,), (1,), (1,), False, False)]


@pytest.mark.parametrize("args", POOL_ARGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_avg_pool1d(args, dtype):
    x = torch.randn(2, 3, 11, dtype=dtype)
    expected = torch.ops.aten.avg_pool1d(x, *args)
    out = np.empty(tuple(expected.shape), x.numpy().dtype)
    get_kernel("aten::avg_pool1d.out").fn(x.numpy(), *args, out)
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size", [1, 4, 7, 11])
def test_adaptive_avg_pool1d(size):
    x = torch.randn(2, 3, 11)
    expected = torch.ops.aten.adaptive_avg_pool1d(x, (size,))
    out = np.empty(tuple(expected.shape), np.float32)
    get_kernel("aten::adaptive_avg_pool1d.out").fn(x.numpy(), (size,), out)
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-6, atol=1e-6)


def test_symbolic_queries_match_torch():
    t = torch.ones(2, 3, 4).permute(2, 0, 1)
    a = t.numpy()
    for dim in range(-3, 3):
        assert get_kernel("aten::sym_stride.int").fn(a, dim) == t.stride(dim)
    assert get_kernel("aten::sym_is_contiguous").fn(a, 0) == t.is_contiguous()
    assert get_kernel("aten::sym_is_contiguous").fn(np.ones((2, 3)), 0) is True
    assert get_kernel("aten::sym_storage_offset").fn(np.ones(3)) == 0


@pytest.mark.parametrize("size", [(2, 2), (3, 4), (0,)])
def test_resize_keeps_the_leading_elements(size):
    x = torch.arange(6.0)
    result = get_kernel("aten::resize_").fn(x.numpy().copy(), size)
    assert result.shape == size
    keep = min(int(np.prod(size)), 6)
    np.testing.assert_array_equal(result.reshape(-1)[:keep], x.clone().resize_(size).reshape(-1)[:keep].numpy())
