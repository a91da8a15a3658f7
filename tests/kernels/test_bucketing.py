"""Bucketing and counting kernels against eager: searchsorted, bucketize, histc, histogram,
bincount (dtypes, sides, sorters, NaN, empty inputs, errors), their shape functions, and a
program using them end to end."""

import numpy as np
import pytest
import torch

from tests.kernels.harness import run_case_and_shape, to_kernel_arg
from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel
from torchedge.runtime import Runtime

A = torch.ops.aten
INTS = [torch.int32, torch.int64]
FLOATS = [torch.float32, torch.float64]
HALVES = [torch.float16, torch.bfloat16]


def _sorted(*shape, dtype, nan=False):
    x = torch.randn(shape, dtype=torch.float64).mul(3)
    if dtype.is_floating_point:
        x = x.to(dtype)
        if nan:
            x.view(-1)[-1] = float("nan")
    else:
        x = x.round().to(dtype)
    return torch.sort(x, dim=-1)[0]


def _values(*shape, dtype):
    x = torch.randn(shape, dtype=torch.float64).mul(4)
    if dtype.is_floating_point:
        x = x.to(dtype)
        if x.numel() > 3:
            x.view(-1)[:3] = torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=dtype)
        return x
    return x.round().to(dtype)


@pytest.mark.parametrize("dtype", INTS + FLOATS + HALVES)
@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize(
    ("seq_shape", "val_shape"), [((7,), (3, 4)), ((7,), ()), ((2, 3, 6), (2, 3, 5)), ((0,), (4,)), ((5,), (0, 2))]
)
def test_searchsorted_matches_eager(dtype, right, seq_shape, val_shape):
    torch.manual_seed(0)
    seq, values = _sorted(*seq_shape, dtype=dtype), _values(*val_shape, dtype=dtype)
    for out_int32 in (False, True):
        run_case_and_shape(
            "aten::searchsorted.Tensor_out",
            lambda s, v, o, r, side, so: A.searchsorted.Tensor(s, v, out_int32=o, right=r, side=side, sorter=so),
            seq,
            values,
            out_int32,
            right,
            None,
            None,
        )


def test_searchsorted_side_sorter_nan_and_mixed_dtypes():
    torch.manual_seed(1)
    seq = torch.tensor([3.0, float("nan"), 1.0, 2.0, 2.0, 0.5])
    sorter = torch.argsort(seq)
    values = torch.tensor([[float("nan"), 2.0, 0.0, 5.0, 1.0]])

    def ref(s, v, o, r, side, so):
        return A.searchsorted.Tensor(s, v, out_int32=o, right=r, side=side, sorter=so)

    for side in ("left", "right"):
        run_case_and_shape("aten::searchsorted.Tensor_out", ref, seq, values, False, False, side, sorter)
    run_case_and_shape("aten::searchsorted.Tensor_out", ref, torch.sort(seq)[0], values, False, True, None, None)
    run_case_and_shape(
        "aten::searchsorted.Tensor_out",
        ref,
        torch.tensor([1, 2, 3]),
        torch.tensor([1.5, 2.0]),
        False,
        False,
        None,
        None,
    )
    run_case_and_shape(
        "aten::searchsorted.Tensor_out",
        ref,
        torch.tensor([0.1]),
        torch.tensor(0.1, dtype=torch.float64),
        False,
        True,
        None,
        None,
    )
    # errors eager raises too: opposite sides, bad side, bad sorter, mismatched leading dims
    run_case_and_shape("aten::searchsorted.Tensor_out", ref, seq, values, False, True, "left", None)
    run_case_and_shape("aten::searchsorted.Tensor_out", ref, seq, values, False, False, "middle", None)
    run_case_and_shape("aten::searchsorted.Tensor_out", ref, seq, values, False, False, None, sorter + 3)
    run_case_and_shape(
        "aten::searchsorted.Tensor_out", ref, torch.zeros(2, 3), torch.zeros(3, 3), False, False, None, None
    )


@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_searchsorted_scalar_and_bucketize_match_eager(dtype):
    torch.manual_seed(2)
    seq = _sorted(9, dtype=dtype)
    values = _values(4, 5, dtype=dtype)
    for right in (False, True):
        for scalar in (0.1, 2, -7.5):
            run_case_and_shape(
                "aten::searchsorted.Scalar_out",
                lambda s, v, o, r, side, so: A.searchsorted.Scalar(s, v, out_int32=o, right=r, side=side, sorter=so),
                seq,
                scalar,
                False,
                right,
                None,
                None,
            )
            run_case_and_shape(
                "aten::bucketize.Scalar_out",
                lambda v, b, o, r: A.bucketize.Scalar(v, b, out_int32=o, right=r),
                scalar,
                seq,
                True,
                right,
            )
        run_case_and_shape(
            "aten::bucketize.Tensor_out",
            lambda v, b, o, r: A.bucketize.Tensor(v, b, out_int32=o, right=r),
            values,
            seq,
            False,
            right,
        )
    with pytest.raises(KernelError, match="1 dimension"):
        get_kernel("aten::bucketize.Tensor_out").fn(np.zeros(3), np.zeros((2, 2)), False, False, np.empty(3, np.int64))


def _hist_values(n, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=gen, dtype=torch.float64).mul(3).to(dtype)
    if seed % 3 == 0:
        x = torch.round(x * 4) / 4  # values on bin edges
    return x


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("seed", range(6))
def test_histc_matches_eager(dtype, seed):
    x = _hist_values(40, dtype, seed)
    for bins, low, high in ((5, 0, 0), (7, -2.0, 1.5), (1, -1, 1), (12, 0.25, 0.25)):
        run_case_and_shape("aten::histc.out", lambda s, b, lo, hi: torch.histc(s, b, lo, hi), x, bins, low, high)
    run_case_and_shape("aten::histc.out", lambda s, b, lo, hi: torch.histc(s, b, lo, hi), x.reshape(5, 8), 4, -1, 1)


def test_histc_edge_cases_and_errors():
    def f(s, b, lo, hi):
        return torch.histc(s, b, lo, hi)

    run_case_and_shape("aten::histc.out", f, torch.full((3,), 2.0), 4, 0, 0)  # constant input: range widened by 1
    run_case_and_shape("aten::histc.out", f, torch.zeros(0), 4, 0, 0)
    run_case_and_shape("aten::histc.out", f, torch.tensor([1.0, float("nan"), 2.0, float("inf")]), 4, 0, 3)
    run_case_and_shape("aten::histc.out", f, torch.tensor([1.0, float("nan")]), 4, 0, 0)  # nan range: error
    run_case_and_shape("aten::histc.out", f, torch.tensor([1.0, 2.0]), 4, 3, 2)  # max < min: error
    run_case_and_shape("aten::histc.out", f, torch.tensor([1, 2]), 4, 0, 0)  # integers: error
    run_case_and_shape("aten::histc.out", f, torch.tensor([1.0, 2.0]), 0, 0, 0)
    with pytest.raises(KernelError, match="float32 or float64"):  # eager takes 16-bit floats too
        get_kernel("aten::histc.out").fn(np.ones(3, np.float16), 4, 0, 0, np.empty(4, np.float16))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("seed", range(6))
def test_histogram_matches_eager(dtype, seed):
    x = _hist_values(30, dtype, seed).reshape(5, 6)
    weight = torch.rand(5, 6, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    edges = torch.sort(torch.randn(6, dtype=dtype, generator=torch.Generator().manual_seed(seed)) * 3)[0]
    for w in (None, weight):
        for density in (False, True):
            for bins, rng in ((5, None), (8, (-1.0, 2.0)), (3, (0.5, 0.5))):
                run_case_and_shape(
                    "aten::histogram.bin_ct_out",
                    lambda s, b, r, w_, d: torch.histogram(s, b, range=r, weight=w_, density=d),
                    x,
                    bins,
                    rng,
                    w,
                    density,
                )
            run_case_and_shape(
                "aten::histogram.bins_tensor_out",
                lambda s, b, w_, d: torch.histogram(s, b, weight=w_, density=d),
                x,
                edges,
                w,
                density,
            )


def test_histogram_edge_cases():
    def ct(s, b, r, w, d):
        return torch.histogram(s, b, range=r, weight=w, density=d)

    def tb(s, b, w, d):
        return torch.histogram(s, b, weight=w, density=d)

    run_case_and_shape("aten::histogram.bin_ct_out", ct, torch.zeros(0), 4, None, None, False)
    run_case_and_shape("aten::histogram.bin_ct_out", ct, torch.full((3,), 2.0), 4, None, None, False)
    run_case_and_shape("aten::histogram.bin_ct_out", ct, torch.tensor([1.0, float("nan")]), 4, None, None, False)
    run_case_and_shape("aten::histogram.bin_ct_out", ct, torch.tensor([1.0, 3.0]), 4, (3.0, 2.0), None, False)
    run_case_and_shape(
        "aten::histogram.bins_tensor_out",
        tb,
        torch.tensor([1.0, 3, float("nan")]),
        torch.tensor([0.0, 2, 3]),
        None,
        False,
    )
    run_case_and_shape(
        "aten::histogram.bins_tensor_out", tb, torch.tensor([1.0, 3.0]), torch.tensor([2.0]), None, False
    )
    run_case_and_shape(
        "aten::histogram.bins_tensor_out", tb, torch.tensor([1.0, 3.0]), torch.tensor([3.0, 2.0]), None, False
    )
    run_case_and_shape(
        "aten::histogram.bins_tensor_out", tb, torch.tensor([1, 3]), torch.tensor([0, 2, 3]), None, False
    )


def _bincount(values, weights, minlength):
    got = get_kernel("aten::bincount.out").fn(to_kernel_arg(values), to_kernel_arg(weights), minlength, None)
    want = torch.bincount(values, weights, minlength)
    assert got.dtype == to_numpy(want).dtype and got.shape == tuple(want.shape)
    np.testing.assert_allclose(got, to_numpy(want), rtol=1.3e-6)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_bincount_matches_eager(dtype):
    values = torch.tensor([3, 0, 3, 7, 1, 3], dtype=dtype)
    for weights in (
        None,
        torch.rand(6),
        torch.rand(6, dtype=torch.float64),
        torch.arange(6),
        torch.ones(6, dtype=torch.bool),
    ):
        for minlength in (0, 5, 12):
            _bincount(values, weights, minlength)
    _bincount(torch.zeros(0, dtype=dtype), None, 3)
    _bincount(torch.zeros(0, dtype=dtype), torch.zeros(0), 2)


@pytest.mark.parametrize(
    ("values", "weights", "minlength", "message"),
    [
        (np.array([-1, 2]), None, 0, "non-negative"),
        (np.array([[1, 2]]), None, 0, "1-d"),
        (np.array([1.0, 2.0]), None, 0, "integer"),
        (np.array([1, 2]), np.ones(3), 0, "same length"),
        (np.array([1, 2]), None, -1, "minlength"),
    ],
)
def test_bincount_refuses_what_eager_refuses(values, weights, minlength, message):
    with pytest.raises(RuntimeError):
        torch.bincount(torch.from_numpy(values), None if weights is None else torch.from_numpy(weights), minlength)
    with pytest.raises(KernelError, match=message):
        get_kernel("aten::bincount.out").fn(values, weights, minlength, None)


class Bucketing(torch.nn.Module):
    @staticmethod
    def _bincount(counts):
        result = torch.bincount(counts, minlength=4)
        torch._check(result.shape[0] <= 64)  # a bound for the planner: the size depends on the data
        return result

    def forward(self, x, edges, counts):
        return (
            torch.searchsorted(edges, x, right=True),
            torch.bucketize(x, edges, out_int32=True),
            torch.histc(x, 6, -2, 2),
            *torch.histogram(x, edges, density=True),
            *torch.histogram(x, 5, range=(-1.0, 1.0)),
            self._bincount(counts),
        )


def test_bucketing_program_matches_eager():
    torch.manual_seed(0)
    inputs = (torch.randn(4, 5), torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5]), torch.tensor([0, 2, 2, 5]))
    program = to_edge(torch.export.export(Bucketing(), inputs)).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    got = method.execute([to_numpy(t) for t in inputs])
    want = Bucketing()(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == to_numpy(w).dtype
        np.testing.assert_allclose(g, to_numpy(w), rtol=1.3e-6, atol=1e-5)
