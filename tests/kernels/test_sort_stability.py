"""sort/argsort/topk leave equal values in eager's order (stable, unstable, descending, nan, ints, bools)."""

import numpy as np
import pytest
import torch

from torchedge.exir import to_edge
from torchedge.kernels.registry import get_kernel
from torchedge.runtime import Runtime

SORT = get_kernel("aten::sort.values").fn
SORT_STABLE = get_kernel("aten::sort.values_stable").fn
ARGSORT = get_kernel("aten::argsort.stable_out").fn
TOPK = get_kernel("aten::topk.values").fn
DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.int8, torch.uint8, torch.int16, torch.bool]


def _inputs(dtype, n, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, (3, n), generator=g).bool()
    x = torch.randint(0, 4, (3, n), generator=g).to(dtype)
    if dtype.is_floating_point:
        x[torch.rand(3, n, generator=g) < 0.2] = float("nan")
        x[torch.rand(3, n, generator=g) < 0.1] = -0.0
        x[torch.rand(3, n, generator=g) < 0.1] = float("inf")
    return x


def _patterns(n):
    """Orders that stress the partition: sorted, reversed, organ pipe, sawtooth, a median-of-3 killer."""
    up = torch.arange(n) // 3
    killer = torch.zeros(n, dtype=torch.int64)
    k = n // 2
    for i in range(k):  # Musser's median-of-3 killer sequence (reaches the heapsort fallback)
        killer[2 * i] = i + 1 if i % 2 == 0 else k + i
        killer[2 * i + 1] = i + 1 + k if i % 2 == 0 else i + 1
    return [up, up.flip(0), torch.cat([up[: n // 2], up[: n - n // 2].flip(0)]), torch.arange(n) % 7, killer // 2]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 16, 17, 33, 100, 1000])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_order_matches_eager(dtype, n, descending):
    for seed in range(3):
        x = _inputs(dtype, n, seed)
        xn = x.numpy()
        for stable in (None, False, True):
            values, indices = np.empty_like(xn), np.empty(xn.shape, np.int64)
            if stable is None:
                want = torch.sort(x, dim=-1, descending=descending)
                SORT(xn, -1, descending, values, indices)
            else:
                want = torch.sort(x, stable=stable, dim=-1, descending=descending)
                SORT_STABLE(xn, stable, -1, descending, values, indices)
            np.testing.assert_array_equal(indices, want.indices.numpy())
            np.testing.assert_array_equal(values, want.values.numpy())
            out = np.empty(xn.shape, np.int64)
            ARGSORT(xn, bool(stable), 1, descending, out)
            np.testing.assert_array_equal(out, torch.argsort(x, stable=bool(stable), dim=1, descending=descending))


@pytest.mark.parametrize("n", [40, 200, 2000])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_order_on_adversarial_patterns(n, descending):
    for x in _patterns(n):
        xn = x.numpy()
        values, indices = np.empty_like(xn), np.empty(xn.shape, np.int64)
        SORT(xn, 0, descending, values, indices)
        np.testing.assert_array_equal(indices, torch.sort(x, descending=descending).indices.numpy())


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != torch.bool])
@pytest.mark.parametrize("n", [1, 5, 17, 64, 100, 1000])
@pytest.mark.parametrize("largest", [False, True])
@pytest.mark.parametrize("sorted_", [True, False])
def test_topk_order_matches_eager(dtype, n, largest, sorted_):
    for seed in range(3):
        x = _inputs(dtype, n, seed)
        xn = x.numpy()
        for k in sorted({0, 1, 2, n // 3, n // 2, n - 1, n} & set(range(n + 1))):
            want = torch.topk(x, k, dim=-1, largest=largest, sorted=sorted_)
            values, indices = np.empty(want.values.shape, xn.dtype), np.empty(want.indices.shape, np.int64)
            TOPK(xn, k, -1, largest, sorted_, values, indices)
            np.testing.assert_array_equal(indices, want.indices.numpy())
            np.testing.assert_array_equal(values, want.values.numpy())


@pytest.mark.parametrize("n", [64, 300, 3000])
def test_topk_order_on_adversarial_patterns(n):
    for x in _patterns(n):
        for k in (1, 3, n // 5, n // 2):
            for largest in (False, True):
                want = torch.topk(x, k, largest=largest)
                values, indices = np.empty(k, np.int64), np.empty(k, np.int64)
                TOPK(x.numpy(), k, 0, largest, True, values, indices)
                np.testing.assert_array_equal(indices, want.indices.numpy())


def test_sort_of_0d_and_empty():
    for x in (torch.tensor(3.0), torch.empty(0, 4), torch.empty(4, 0)):
        xn = x.numpy()
        values, indices = np.empty_like(xn), np.empty(xn.shape, np.int64)
        SORT(xn, -1, True, values, indices)
        np.testing.assert_array_equal(indices, torch.sort(x, descending=True).indices.numpy())


class _Orders(torch.nn.Module):
    def forward(self, x):
        values, indices = torch.sort(x, dim=1, descending=True)
        top = torch.topk(x, 5, dim=1)
        return values, indices, torch.argsort(x, dim=0), top.values, top.indices


def test_end_to_end_orders_match_eager():
    x = torch.randint(0, 3, (6, 40)).float()
    x[0, :5] = float("nan")
    buffer = to_edge(torch.export.export(_Orders(), (x,))).to_executorch().buffer
    got = Runtime.get().load_program(buffer).load_method("forward").execute([x.numpy()])
    for out, want in zip(got, _Orders()(x)):
        np.testing.assert_array_equal(np.asarray(out), want.numpy())
