"""Scan kernels (cumprod, cummax, cummin, logcumsumexp) against PyTorch eager: dtypes, dims,
ties, nan, signed zeros, empty and 0-dim inputs, shapes, and a program."""

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import ALL, F16, F32, F64, FLOATS, I8, I32, I64, INTS, U8, B, Case, rand, run_case
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import output_shapes
from torchedge.runtime import Runtime

aten = torch.ops.aten
nan, inf = math.nan, math.inf
T = torch.tensor


def _cumprod(x, dim, dtype):
    return aten.cumprod.default(x, dim, dtype=dtype)


def _cumprod_cases():
    for dtype in ALL:
        for dim in [0, 1, -1]:
            x = rand(3, 5, dtype=dtype, low=-2, high=2)
            yield Case("aten::cumprod.out", _cumprod, (x, dim, None), id=f"cumprod-{dtype}-{dim}").param()
    wrap = T([100, 100, 100, -7], dtype=I8)
    for dtype in [None, I8, I32, F32, F64]:
        ref = lambda x, d, dt=dtype: aten.cumprod.default(x, d, dtype=dt)  # noqa: E731
        yield Case("aten::cumprod.out", ref, (wrap, 0, dtype), id=f"cumprod-dtype-{dtype}").param()
    special = T([2.0, inf, 0.0, -1.0, nan, 3.0])
    for dtype in FLOATS:
        yield Case("aten::cumprod.out", _cumprod, (special.to(dtype), 0, None), id=f"cumprod-special-{dtype}").param()
    long = torch.linspace(0.9, 1.1, 500, dtype=F32)
    yield Case("aten::cumprod.out", _cumprod, (long, 0, None), id="cumprod-long").param()
    yield Case("aten::cumprod.out", _cumprod, (rand(0, 3), 1, None), id="cumprod-empty").param()
    yield Case("aten::cumprod.out", _cumprod, (T(2.5), 0, None), id="cumprod-0dim").param()
    yield Case("aten::cumprod.out", _cumprod, (rand(3), 1, None), id="cumprod-bad-dim").param()


def _extreme_cases():
    for name in ["cummax", "cummin"]:
        op, ref = f"aten::{name}.out", getattr(aten, name).default
        for dtype in ALL:
            x = rand(4, 7, dtype=dtype, low=-2, high=2)  # few distinct values: many ties
            for dim in [0, 1, -2]:
                yield Case(op, ref, (x, dim), id=f"{name}-{dtype}-{dim}").param()
        values = T([1.0, 3.0, 3.0, 2.0, -1.0, nan, 5.0, -5.0, nan, 1.0, nan])
        for dtype in FLOATS:
            yield Case(op, ref, (values.to(dtype), 0), id=f"{name}-nan-{dtype}").param()
            yield Case(
                op,
                ref,
                (T([[0.0, -0.0, 0.0, -0.0], [-0.0, 0.0, -inf, inf]], dtype=dtype), 1),
                id=f"{name}-zeros-{dtype}",
            ).param()
        yield Case(op, ref, (rand(0, 3), 0), id=f"{name}-empty").param()
        yield Case(op, ref, (T(-1.5), 0), id=f"{name}-0dim").param()
        for dtype in [U8, I64]:
            info = torch.iinfo(dtype)
            yield Case(
                op, ref, (T([info.min, info.max, 3, info.max, info.min], dtype=dtype), 0), id=f"{name}-limits-{dtype}"
            ).param()


def _logcumsumexp_cases():
    for dtype in FLOATS:
        for dim in [0, 1]:
            x = rand(4, 6, dtype=dtype, low=-20, high=20)
            yield Case("aten::logcumsumexp.out", aten.logcumsumexp.default, (x, dim), id=f"lcse-{dtype}-{dim}").param()
        special = T([-inf, -inf, 1.0, 800.0, -800.0, inf, 2.0, nan, 1.0])
        yield Case(
            "aten::logcumsumexp.out", aten.logcumsumexp.default, (special.to(dtype), 0), id=f"lcse-special-{dtype}"
        ).param()
    yield Case("aten::logcumsumexp.out", aten.logcumsumexp.default, (T([inf, -inf, inf]), 0), id="lcse-infs").param()
    yield Case("aten::logcumsumexp.out", aten.logcumsumexp.default, (rand(1000, dtype=F32), 0), id="lcse-long").param()
    yield Case("aten::logcumsumexp.out", aten.logcumsumexp.default, (rand(2, 0), 1), id="lcse-empty").param()
    yield Case("aten::logcumsumexp.out", aten.logcumsumexp.default, (T(0.5), 0), id="lcse-0dim").param()
    for dtype in [I64, B]:  # eager refuses
        yield Case(
            "aten::logcumsumexp.out", aten.logcumsumexp.default, (rand(3, dtype=dtype), 0), id=f"lcse-{dtype}"
        ).param()


@pytest.mark.parametrize("case", [*_cumprod_cases(), *_extreme_cases(), *_logcumsumexp_cases()])
def test_scans_match_eager(case):
    run_case(case)


@pytest.mark.parametrize("dtype", INTS + [B, F16])
def test_cummax_ties_take_the_last_index(dtype):
    x = T([1, 1, 0, 1, 0, 0], dtype=dtype)
    for name in ["cummax", "cummin"]:
        run_case(Case(f"aten::{name}.out", getattr(aten, name).default, (x, 0)))


@pytest.mark.parametrize(
    ("op", "ref", "args", "outs"),
    [
        ("aten::cumprod.out", lambda x, d, dt: torch.cumprod(x, d, dtype=dt), (torch.ones(2, 0, 3), 1, None), 1),
        ("aten::cummax.out", lambda x, d: torch.cummax(x, d), (torch.ones(4, 3), -1), 2),
        ("aten::cummin.out", lambda x, d: torch.cummin(x, d), (torch.ones(()), 0), 2),
        ("aten::logcumsumexp.out", torch.logcumsumexp, (torch.ones(5, 1, 2), 0), 1),
    ],
)
def test_shape_functions_match_eager(op, ref, args, outs):
    expected = ref(*args)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    kernel_args = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
    shapes = output_shapes(op, [*kernel_args, *[np.empty(0)] * outs])
    assert shapes == [tuple(e.shape) for e in expected]


class ScanModule(torch.nn.Module):
    def forward(self, x, i):
        values, indices = torch.cummax(x, 1)
        low, where = torch.cummin(i, 0)
        return torch.cumprod(x, 0), values, indices, low, where, torch.logcumsumexp(x, 1), torch.cumprod(i, 1)


def test_scan_program_runs_like_eager():
    x = T([[1.0, 3.0, 3.0, nan, 2.0], [-1.0, -0.5, 2.0, 2.0, -inf]])
    i = T([[3, 1, 4, 1, 5], [2, 1, 4, -1, 5]], dtype=I32)
    buffer = to_edge(torch.export.export(ScanModule(), (x, i))).to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method("forward")
    got = method.execute([to_numpy(x), to_numpy(i)])
    for g, w in zip(got, ScanModule()(x, i)):
        assert np.asarray(g).dtype == to_numpy(w).dtype
        np.testing.assert_allclose(np.asarray(g), to_numpy(w), rtol=1.3e-6, atol=1e-5, equal_nan=True)
