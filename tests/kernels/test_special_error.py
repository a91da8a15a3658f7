"""The error-function family (erfc, special_erfcx, special_ndtri) against eager, and the clamps of
the float32 erf and GELU rationals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import BF16, F16, F32, F64, INTS, Case, run_case
from torchedge.kernels.registry import output_shapes

INF, NAN = float("inf"), float("nan")
TOLERANCES = {np.dtype(np.float64): (1e-7, 1e-7), np.dtype(np.float32): (1.3e-6, 1e-5)}
EDGES = [
    0.0,
    -0.0,
    0.5,
    -0.5,
    1e-20,
    -1e-20,
    11.99,
    12.0,
    12.01,
    26.0,
    27.5,
    30.0,
    -6.0,
    -26.0,
    1e10,
    -1e10,
    INF,
    -INF,
    NAN,
]


def values(dtype, low=-8.0, high=30.0, n=500) -> torch.Tensor:
    rng = np.random.default_rng(2)
    return torch.from_numpy(np.concatenate([rng.uniform(low, high, n), EDGES])).to(dtype)


def run(op, ref, *args):
    run_case(Case(op, ref, args), tolerances=TOLERANCES)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
def test_erfc_matches_eager(dtype):
    run("aten::erfc.out", torch.erfc, values(dtype))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_erfcx_matches_eager(dtype):
    x = values(dtype)
    if dtype == F32:  # eager's float32 exp(x²) loses digits below -3: compare those with float64 eager
        run("aten::special_erfcx.out", torch.special.erfcx, x[~(x < -3)])
        run("aten::special_erfcx.out", lambda t: torch.special.erfcx(t.double()).float(), x)
        return
    run("aten::special_erfcx.out", torch.special.erfcx, x)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_ndtri_matches_eager(dtype):
    p = np.concatenate(
        [
            np.linspace(0, 1, 1001),
            np.logspace(-300, 0, 301),
            1 - np.logspace(-15, -0.4, 50),
            [-0.5, 1.5, 0.5, 1e-320, INF, -INF, NAN],
        ]
    )
    run("aten::special_ndtri.out", torch.special.ndtri, torch.from_numpy(p).to(dtype))


@pytest.mark.parametrize("dtype", [torch.bool, *INTS])
def test_integer_inputs_give_float32(dtype):
    x = torch.tensor([True, False]) if dtype == torch.bool else torch.arange(-3, 4).to(dtype)
    if dtype == torch.uint8:
        x = torch.arange(0, 7).to(dtype)
    run("aten::erfc.out", torch.erfc, x)
    run("aten::special_erfcx.out", torch.special.erfcx, x)
    run("aten::special_ndtri.out", torch.special.ndtri, x)


@pytest.mark.parametrize("op", ["special_erfcx", "special_ndtri"])
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_half_is_refused_like_eager(op, dtype):
    run(f"aten::{op}.out", getattr(torch.special, op.removeprefix("special_")), torch.ones(3, dtype=dtype))


@pytest.mark.parametrize("shape", [(0,), (), (2, 0), (3, 4)])
def test_empty_and_zero_dim(shape):
    x = torch.rand(shape, dtype=torch.float64)
    for op, fn in [
        ("erfc", torch.erfc),
        ("special_erfcx", torch.special.erfcx),
        ("special_ndtri", torch.special.ndtri),
    ]:
        run(f"aten::{op}.out", fn, x)
        assert output_shapes(f"aten::{op}.out", [x.numpy(), np.empty(0)]) == [tuple(fn(x).shape)]


class ErrorFamily(torch.nn.Module):
    def forward(self, x, p):
        return (
            torch.erfc(x),
            torch.special.erfc(x),
            torch.special.erfcx(x),
            torch.special.ndtri(p),
            torch.special.log_ndtr(x),
        )


def test_error_family_end_to_end():
    from torchedge.exir import to_edge
    from torchedge.runtime import Runtime

    x = torch.tensor([[-3.0, -0.5, 0.0, 0.25], [1.0, 4.0, 9.0, 15.0]])
    p = torch.tensor([1e-6, 0.1, 0.5, 0.975])
    model = ErrorFamily()
    program = to_edge(torch.export.export(model, (x, p))).to_executorch()
    outputs = Runtime.get().load_program(program.buffer).load_method("forward").execute([x.numpy(), p.numpy()])
    expected = model(x, p)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(got, want.numpy(), rtol=1.3e-6, atol=1e-5)


def _float32s(low: float, high: float) -> np.ndarray:
    """Every float32 from ``low`` to ``high`` (both positive)."""
    bits = np.arange(np.float32(low).view(np.int32), np.float32(high).view(np.int32) + 1, dtype=np.int32)
    return bits.view(np.float32)


def _ratios(rational, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for start, _, ratio in rational.blocks(x):
        out[start : start + ratio.size] = ratio
    return out


@pytest.mark.parametrize("name, thin", [("erf", 2.3), ("gelu", 3.3)])
def test_float32_rationals_reach_their_bound_exactly_at_the_clamp(name, thin):
    """The clamp of each float32 rational is where it first reaches its bound, with nothing
    beyond the bound on the way: over every float32 where the bound is within about 1e-3, and densely
    below. Far out erf is then exactly ±1 and GELU exactly 0 or x, with no clip of the ratio."""
    from torchedge.kernels.portable.activation import _GELU32
    from torchedge.kernels.portable.special import _ERF32

    rational = {"erf": _ERF32, "gelu": _GELU32}[name]
    bound = np.float32(rational.bound)
    near = _float32s(thin, rational.limit)
    ratios = _ratios(rational, near)
    assert ratios[-1] == bound and ratios.max() == bound
    assert _ratios(rational, np.linspace(0, thin, 1_000_001, dtype=np.float32)).max() < bound * (1 - 1e-4)
    far = np.array([rational.limit, 10.0, 3e38, np.inf], np.float32)
    np.testing.assert_array_equal(_ratios(rational, far), bound)
    np.testing.assert_array_equal(_ratios(rational, -far), -bound)
    true = {"erf": math.erf(rational.limit), "gelu": math.erf(rational.limit / math.sqrt(2)) / 2}[name]
    assert 0 < rational.bound - true < 1e-6  # the clamp lies where the function is within an ulp or two of its bound
