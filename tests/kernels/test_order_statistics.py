"""Order statistics and moments (median, nanmedian, mode, kthvalue, var_mean, std_mean) against
PyTorch eager: dtypes, ties, nan, empty and 0-dim inputs, shapes, and a program."""

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import ALL, F32, FLOATS, I64, U8, B, Case, rand, run_case
from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

aten = torch.ops.aten
nan, inf = math.nan, math.inf
T = torch.tensor
TIES = T([[2.0, 1.0, 2.0, 1.0, 2.0, 1.0], [5.0, 5.0, 5.0, 5.0, 5.0, 5.0], [3.0, -0.0, 0.0, 1.0, 0.0, -0.0]])
NANS = T([[3.0, nan, 2.0, nan, 1.0], [1.0, 2.0, 3.0, 4.0, nan], [-inf, 1.0, 1.0, 2.0, inf]])


def _median_cases():
    for name in ["median", "nanmedian"]:
        ref_all, ref_dim = getattr(aten, name).default, getattr(aten, name).dim
        for dtype in ALL:
            x = rand(5, 7, dtype=dtype, low=-3, high=3)  # few distinct values: ties
            yield Case(f"aten::{name}.out", ref_all, (x,), id=f"{name}-{dtype}").param()
            for dim, keepdim in [(0, False), (1, True), (-1, False)]:
                yield Case(
                    f"aten::{name}.dim_values", ref_dim, (x, dim, keepdim), id=f"{name}-{dtype}-{dim}-{keepdim}"
                ).param()
        for dtype in FLOATS:
            for data in [TIES, NANS]:
                yield Case(f"aten::{name}.out", ref_all, (data.to(dtype),), id=f"{name}-all-{dtype}").param()
                for dim in [0, 1]:
                    yield Case(
                        f"aten::{name}.dim_values", ref_dim, (data.to(dtype), dim, False), id=f"{name}-{dtype}"
                    ).param()
        for size in [17, 100, 1001]:  # long rows, many ties
            x = rand(6, size, low=-4, high=4).round()
            yield Case(f"aten::{name}.dim_values", ref_dim, (x, 1, False), id=f"{name}-long-{size}").param()
        yield Case(f"aten::{name}.out", ref_all, (rand(0),), id=f"{name}-empty").param()
        yield Case(f"aten::{name}.out", ref_all, (T(nan),), id=f"{name}-0dim-nan").param()
        yield Case(f"aten::{name}.dim_values", ref_dim, (T(2.0), 0, False), id=f"{name}-0dim").param()
        yield Case(f"aten::{name}.dim_values", ref_dim, (rand(0, 3), 1, True), id=f"{name}-no-rows").param()
        yield Case(f"aten::{name}.dim_values", ref_dim, (rand(3, 0), 1, False), id=f"{name}-empty-dim").param()
    x = T([[nan, 1.0, nan, 2.0, 3.0], [nan, nan, 4.0, 1.0, 2.0]])
    yield Case("aten::nanmedian.dim_values", aten.nanmedian.dim, (x, 1, False), id="nanmedian-some-nan").param()


def _mode_cases():
    for dtype in ALL:
        for size in [1, 5, 16]:  # eager's index among equal values is the last for rows of up to 16
            x = rand(6, size, dtype=dtype, low=-2, high=2)
            yield Case("aten::mode.values", aten.mode.default, (x, 1, False), id=f"mode-{dtype}-{size}").param()
        x = rand(7, 4, dtype=dtype, low=-2, high=2)
        yield Case("aten::mode.values", aten.mode.default, (x, 0, True), id=f"mode-{dtype}-dim0").param()
    rows = T(
        [[1.0, 1.0, 2.0, 2.0, 3.0], [2.0, 2.0, 1.0, 1.0, 3.0], [3.0, 0.0, -0.0, 1.0, 9.0], [4.0, 3.0, 2.0, 1.0, 0.0]]
    )
    for dtype in FLOATS:
        yield Case("aten::mode.values", aten.mode.default, (rows.to(dtype), -1, False), id=f"mode-ties-{dtype}").param()
    yield Case("aten::mode.values", aten.mode.default, (T([nan, nan, nan]), 0, False), id="mode-all-nan").param()
    yield Case("aten::mode.values", aten.mode.default, (T(3.0), 0, False), id="mode-0dim").param()
    yield Case("aten::mode.values", aten.mode.default, (rand(3, 0), 1, False), id="mode-empty-dim").param()


def _kthvalue_cases():
    for dtype in [d for d in ALL if d != B]:
        x = rand(4, 6, dtype=dtype, low=-50, high=50) if dtype.is_floating_point else torch.randperm(24).reshape(4, 6)
        x = x.to(dtype) if not dtype.is_floating_point else x
        for k, dim, keepdim in [(1, 1, False), (3, 1, True), (6, -1, False), (2, 0, False), (4, 0, True)]:
            yield Case(
                "aten::kthvalue.values", aten.kthvalue.default, (x, k, dim, keepdim), id=f"kth-{dtype}-{k}-{dim}"
            ).param()
    distinct_nan = T(
        [[3.0, 1.0, nan, 2.0, -inf], [nan, 3.0, 0.5, -0.5, 7.0]]
    )  # one nan a row: eager orders equal values by quickselect
    for k in range(1, 6):
        yield Case(
            "aten::kthvalue.values", aten.kthvalue.default, (distinct_nan, k, 1, False), id=f"kth-nan-{k}"
        ).param()
    yield Case("aten::kthvalue.values", aten.kthvalue.default, (T(3.0), 1, 0, False), id="kth-0dim").param()
    for k in [0, 7]:  # out of range
        yield Case("aten::kthvalue.values", aten.kthvalue.default, (rand(2, 6), k, 1, False), id=f"kth-bad-{k}").param()
    yield Case(
        "aten::kthvalue.values", aten.kthvalue.default, (rand(2, 3, dtype=B), 1, 1, False), id="kth-bool"
    ).param()


def _var_mean(x, dim, correction, keepdim):
    return aten.var_mean.correction(x, dim, correction=correction, keepdim=keepdim)


def _std_mean(x, dim, correction, keepdim):
    return aten.std_mean.correction(x, dim, correction=correction, keepdim=keepdim)


def _moment_cases():
    for name, ref in [("var_mean", _var_mean), ("std_mean", _std_mean)]:
        op = f"aten::{name}.correction_out"
        for dtype in FLOATS:
            x = rand(3, 4, 5, dtype=dtype)
            for dim, correction, keepdim in [
                (None, None, False),
                ([1], 0, True),
                ([0, 2], 1, False),
                ([-1], 2.5, False),
            ]:
                yield Case(op, ref, (x, dim, correction, keepdim), id=f"{name}-{dtype}-{dim}-{correction}").param()
        yield Case(op, ref, (T([1.0, 2.0]), None, 3, False), id=f"{name}-too-few").param()
        yield Case(op, ref, (T([1.0]), None, None, False), id=f"{name}-one").param()
        yield Case(op, ref, (T([1.0, nan, inf]), [0], None, False), id=f"{name}-nan").param()
        yield Case(op, ref, (rand(0, 3), [0], None, False), id=f"{name}-empty").param()
        yield Case(op, ref, (T(2.0), None, 0, False), id=f"{name}-0dim").param()
        yield Case(op, ref, (1e4 + rand(1000, dtype=F32), None, None, False), id=f"{name}-offset").param()
        for dtype in [I64, B]:  # eager refuses
            yield Case(op, ref, (rand(4, dtype=dtype), None, None, False), id=f"{name}-{dtype}").param()


@pytest.mark.parametrize("case", [*_median_cases(), *_mode_cases(), *_kthvalue_cases(), *_moment_cases()])
def test_order_statistics_match_eager(case):
    run_case(case)


@pytest.mark.parametrize("dtype", [F32, I64, U8])
def test_kthvalue_picks_a_tied_value_and_its_position(dtype):
    """Eager's quickselect decides which of equal values it reports; any of them is valid."""
    x = rand(20, 9, dtype=dtype, low=0, high=3)
    values, indices = np.empty((20,), to_numpy(x).dtype), np.empty((20,), np.int64)
    for k in range(1, 10):
        get_kernel("aten::kthvalue.values").fn(to_numpy(x), k, 1, False, values, indices)
        expected = torch.kthvalue(x, k, 1).values
        np.testing.assert_array_equal(values, to_numpy(expected))
        np.testing.assert_array_equal(np.take_along_axis(to_numpy(x), indices[:, None], 1)[:, 0], values)


def test_kernels_refuse_bool_like_eager():
    x = np.array([True, False])
    for op in ["aten::median.out", "aten::nanmedian.out"]:
        with pytest.raises(KernelError, match="bool"):
            get_kernel(op).fn(x, np.empty((), bool))


@pytest.mark.parametrize(
    ("op", "ref", "args"),
    [
        ("aten::median.out", torch.median, (torch.ones(3, 4),)),
        ("aten::nanmedian.out", torch.nanmedian, (torch.ones(0),)),
        ("aten::median.dim_values", torch.median, (torch.ones(3, 4), 1, True)),
        ("aten::nanmedian.dim_values", torch.nanmedian, (torch.ones(3, 4), -2, False)),
        ("aten::mode.values", torch.mode, (torch.ones(2, 3, 4), 1, False)),
        ("aten::kthvalue.values", torch.kthvalue, (torch.ones(2, 3, 4), 2, 2, True)),
        (
            "aten::var_mean.correction_out",
            lambda x, d, c, k: torch.var_mean(x, d, correction=c, keepdim=k),
            (torch.ones(2, 3, 4), [0, 2], 1, True),
        ),
        (
            "aten::std_mean.correction_out",
            lambda x, d, c, k: torch.std_mean(x, d, correction=c, keepdim=k),
            (torch.ones(2, 3), None, 1, False),
        ),
    ],
)
def test_shape_functions_match_eager(op, ref, args):
    expected = ref(*args)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    kernel_args = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
    shapes = output_shapes(op, [*kernel_args, *[np.empty(0)] * len(expected)])
    assert shapes == [tuple(e.shape) for e in expected]


class StatsModule(torch.nn.Module):
    def forward(self, x, i):
        med, med_at = torch.median(x, 1)
        nmed, nmed_at = torch.nanmedian(x, 0, keepdim=True)
        often, often_at = torch.mode(i, 1)
        kth, kth_at = torch.kthvalue(i, 2, 1)
        var, mean = torch.var_mean(x, 1, correction=0)
        std, mean2 = torch.std_mean(x, [0, 1])
        return (
            torch.median(x),
            torch.nanmedian(x),
            med,
            med_at,
            nmed,
            nmed_at,
            often,
            often_at,
            kth,
            kth_at,
            var,
            mean,
            std,
            mean2,
        )


def test_statistics_program_runs_like_eager():
    x = T([[3.0, 1.0, 2.0, 2.0, 5.0], [nan, 0.0, -1.0, 4.0, 4.0], [1.0, 1.0, 1.0, -2.0, 7.0]])
    i = T([[4, 1, 4, 1, 2], [0, 9, 9, 3, 3]], dtype=I64)
    buffer = to_edge(torch.export.export(StatsModule(), (x, i))).to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method("forward")
    got = method.execute([to_numpy(x), to_numpy(i)])
    for g, w in zip(got, StatsModule()(x, i)):
        assert np.asarray(g).dtype == to_numpy(w).dtype
        np.testing.assert_allclose(np.asarray(g), to_numpy(w), rtol=1.3e-6, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("size", [17, 200])
def test_mode_of_long_rows_matches_eager_values(size):
    """Past 16 elements eager's sort may report any index of the mode: check it holds the mode."""
    x = rand(8, size, dtype=I64, low=0, high=6)
    values, indices = np.empty(8, np.int64), np.empty(8, np.int64)
    get_kernel("aten::mode.values").fn(to_numpy(x), 1, False, values, indices)
    np.testing.assert_array_equal(values, to_numpy(torch.mode(x, 1).values))
    np.testing.assert_array_equal(np.take_along_axis(to_numpy(x), indices[:, None], 1)[:, 0], values)
    assert all(indices[r] == np.flatnonzero(to_numpy(x)[r] == values[r]).max() for r in range(8))  # the last one
