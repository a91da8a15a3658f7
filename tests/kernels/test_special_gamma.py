"""The gamma family (lgamma, digamma, polygamma, mvlgamma, igamma, igammac, special_zeta) against eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.kernels.harness import BF16, F16, F32, F64, INTS, Case, run_case, to_kernel_arg
from torchedge.errors import KernelError
from torchedge.kernels.registry import get_kernel, output_shapes

INF, NAN = float("inf"), float("nan")
# the project's float tolerances for kernels that compute in float64 and round once
TOLERANCES = {np.dtype(np.float64): (1e-7, 1e-7), np.dtype(np.float32): (1.3e-6, 1e-5)}

EDGES = [
    0.0,
    -0.0,
    1.0,
    2.0,
    0.5,
    -0.5,
    -1.5,
    -2.75,
    1e-30,
    1e-5,
    7.5,
    9.99,
    10.0,
    30.5,
    171.5,
    1e6,
    1e30,
    INF,
    -INF,
    NAN,
]


def values(dtype, extra=(), low=-12.0, high=40.0, n=400, seed=0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    base = np.concatenate([rng.uniform(low, high, n), np.asarray(EDGES + list(extra))])
    return torch.from_numpy(base).to(dtype)


def run(op, ref, *args, tolerances=TOLERANCES):
    run_case(Case(op, ref, args), tolerances=tolerances)


POLES = [-1.0, -2.0, -7.0]  # poles; float32 trigamma's value at them is ATen's rounding of π/sin(πx)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
def test_lgamma_and_digamma_match_eager(dtype):
    x = values(dtype, POLES)
    run("aten::lgamma.out", torch.lgamma, x)
    run("aten::digamma.out", torch.digamma, x)


def float64_eager(n, t):
    """Eager in float64, rounded to t's dtype: eager's float32 polygamma loses digits for
    negative x (its float32 π/sin(πx), and the cancelling terms of ζ(n+1, x))."""
    return torch.polygamma(n, t.double()).to(t.dtype)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 12])
def test_polygamma_matches_eager(n, dtype):
    x = values(dtype, POLES if n != 1 else [], low=-8.0, high=30.0)
    if dtype in (F16, BF16):  # eager computes 16-bit polygamma at 16-bit precision: positive x only
        x = x[(x.float() > 0.25) & (x.float() < 1e4)]
        if n > 5:
            return
    if dtype == F32 and n > 0:
        run("aten::polygamma.out", torch.polygamma, n, x[x > 0.5])
        run("aten::polygamma.out", float64_eager, n, x)
        return
    run("aten::polygamma.out", torch.polygamma, n, x)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("n", [30, 35, 40])
def test_polygamma_of_high_order_overflows_like_eager(n, dtype):
    """float32 eager rounds n! to float32 (inf from n = 35) and ζ(n+1, x) (0 when it underflows)."""
    run("aten::polygamma.out", torch.polygamma, n, torch.tensor([2.0, 10.0, 30.0, 0.5], dtype=dtype))


def test_trigamma_reflects_like_aten_at_float64_poles():
    """ATen's π/sin(πx) misses the pole by a rounding: a huge finite value, not inf."""
    x = torch.tensor([-1.0, -3.0, 0.0, -0.0, -2.5], dtype=torch.float64)
    run("aten::polygamma.out", torch.polygamma, 1, x)


@pytest.mark.parametrize("dtype", [torch.bool, *INTS])
def test_integer_inputs_give_float32(dtype):
    x = torch.arange(0, 12).to(dtype) if dtype != torch.bool else torch.tensor([True, False])
    for op, fn in [("aten::lgamma.out", torch.lgamma), ("aten::digamma.out", torch.digamma)]:
        run(op, fn, x)
    run("aten::polygamma.out", torch.polygamma, 3, x)
    signed = torch.arange(-4, 5).to(dtype) if dtype not in (torch.bool, torch.uint8) else x
    run("aten::lgamma.out", torch.lgamma, signed)
    run("aten::digamma.out", torch.digamma, signed)


@pytest.mark.parametrize("shape", [(0,), (), (3, 0, 2), (2, 3)])
def test_empty_and_zero_dim(shape):
    x = torch.rand(shape, dtype=torch.float64) * 5
    run("aten::lgamma.out", torch.lgamma, x)
    run("aten::polygamma.out", torch.polygamma, 2, x)
    run("aten::igamma.out", torch.igamma, x, x + 1)
    run("aten::special_zeta.out", torch.special.zeta, x + 1.5, x)


def test_polygamma_refuses_negative_n():
    with pytest.raises(RuntimeError):
        torch.polygamma(-1, torch.ones(2))
    with pytest.raises(KernelError, match="polygamma"):
        get_kernel("aten::polygamma.out").fn(-1, np.ones(2, np.float32), np.empty(2, np.float32))


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16, torch.int64])
@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_mvlgamma_matches_eager(p, dtype):
    x = torch.linspace((p - 1) / 2 + 0.25, 40, 50, dtype=torch.float64).to(dtype)
    if not dtype.is_floating_point:
        x = x[x > (p - 1) / 2]
    run("aten::mvlgamma.out", torch.mvlgamma, x, p)
    if dtype == F64:  # no domain check, as in eager
        run("aten::mvlgamma.out", torch.mvlgamma, torch.linspace(-4.9, 4.9, 40, dtype=dtype), p)


@pytest.mark.parametrize(("x", "p"), [(torch.tensor([2.0]), 0), (torch.tensor([True]), 1)])
def test_mvlgamma_refuses_what_eager_refuses(x, p):
    with pytest.raises(RuntimeError):
        torch.mvlgamma(x, p)
    with pytest.raises(KernelError, match="mvlgamma"):
        get_kernel("aten::mvlgamma.out").fn(to_kernel_arg(x), p, np.empty(x.shape, np.float32))


SPECIAL = [-1.0, 0.0, 1.0, 0.5, 2.0, INF, NAN, -INF]


def grid(dtype, first, second):
    a, b = np.meshgrid(np.asarray(first, np.float64), np.asarray(second, np.float64))
    return torch.from_numpy(a).to(dtype), torch.from_numpy(b).to(dtype)


@pytest.mark.parametrize("op", ["igamma", "igammac"])
@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
def test_incomplete_gamma_matches_eager(op, dtype):
    rng = np.random.default_rng(1)
    a = np.concatenate([np.logspace(-3, 3, 40), rng.uniform(0, 20, 20), SPECIAL])
    x = np.concatenate([np.logspace(-4, 3.2, 40), rng.uniform(0, 20, 20), SPECIAL])
    a, x = grid(dtype, a, x)
    run(f"aten::{op}.out", getattr(torch, op), a, x)
    run(f"aten::{op}.out", getattr(torch, op), a[:1], x)  # broadcast


@pytest.mark.parametrize("op", ["igamma", "igammac"])
def test_incomplete_gamma_large_a_and_mixed_dtypes(op):
    a = torch.tensor([1e4, 1e4, 1e5, 2.5e5], dtype=torch.float64)
    x = torch.tensor([1e4 + 50, 1e4 - 300, 1e5 - 10, 2.5e5 + 1000], dtype=torch.float64)
    run(f"aten::{op}.out", getattr(torch, op), a, x)
    run(f"aten::{op}.out", getattr(torch, op), a.float(), x)  # float32 and float64: float64


@pytest.mark.parametrize("dtype", [torch.bool, torch.int32, torch.int64])
def test_incomplete_gamma_refuses_integers(dtype):
    x = torch.ones(3, dtype=dtype)
    run("aten::igamma.out", torch.igamma, x, x)  # eager raises: the kernel must raise too


@pytest.mark.parametrize("dtype", [F32, F64])
def test_zeta_matches_eager(dtype):
    s = np.concatenate([np.linspace(1.25, 30, 25), [2.0, 3.0, 4.0, 7.0, 1e3], SPECIAL])
    q = np.concatenate([np.linspace(-9.75, 40, 60), [1e-6, 1e5, 1e200], SPECIAL, [-3.0, -2.5, -1.5]])
    s, q = grid(dtype, s, q)
    run("aten::special_zeta.out", torch.special.zeta, s, q)


@pytest.mark.parametrize("dtype", [F32, F64, torch.int64, torch.bool])
def test_zeta_scalar_overloads(dtype):
    q = torch.arange(1, 9).to(dtype) if dtype != torch.bool else torch.tensor([True, True])
    run("aten::special_zeta.self_scalar_out", torch.special.zeta, 2.5, q)
    run("aten::special_zeta.other_scalar_out", torch.special.zeta, q + 1 if dtype != torch.bool else q, 1.5)
    run("aten::special_zeta.out", torch.special.zeta, q, q)


def test_zeta_refuses_half():
    x = torch.ones(2, dtype=torch.float16)
    run("aten::special_zeta.out", torch.special.zeta, x, x)


@pytest.mark.parametrize(
    ("op", "args", "eager"),
    [
        ("aten::lgamma.out", (np.ones((2, 3)),), torch.lgamma),
        ("aten::polygamma.out", (2, np.ones((4, 1))), lambda n, t: torch.polygamma(n, t)),
        ("aten::mvlgamma.out", (np.full((3, 2), 5.0), 2), torch.mvlgamma),
        ("aten::igamma.out", (np.ones((2, 1)), np.ones(5)), torch.igamma),
        ("aten::igammac.out", (np.ones((3, 1, 1)), np.ones((2, 1))), torch.igammac),
        ("aten::special_zeta.out", (np.full((2, 1), 2.0), np.ones(3)), torch.special.zeta),
        ("aten::special_zeta.self_scalar_out", (2.0, np.ones((2, 3))), torch.special.zeta),
        ("aten::special_zeta.other_scalar_out", (np.ones((4,)) * 2, 1.0), torch.special.zeta),
    ],
)
def test_shape_functions_match_eager(op, args, eager):
    torch_args = [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
    expected = eager(*torch_args)
    assert output_shapes(op, [*args, np.empty(0)]) == [tuple(expected.shape)]


class GammaFamily(torch.nn.Module):
    def forward(self, x, a):
        return (
            torch.lgamma(x),
            torch.digamma(x),
            torch.polygamma(1, x),
            torch.polygamma(3, x),
            torch.special.gammaln(x),
            torch.special.multigammaln(x.abs() + 2, 3),
            torch.igamma(a, x.abs()),
            torch.special.gammaincc(a, x.abs()),
            torch.special.zeta(a + 1, x.abs()),
            torch.special.zeta(2.0, x.abs() + 0.5),
            torch.special.zeta(a + 1.5, 3.0),
        )


def test_gamma_family_end_to_end():
    from torchedge.exir import to_edge
    from torchedge.runtime import Runtime

    x = torch.tensor([[0.25, 1.5, -2.5, 7.0], [12.0, -0.75, 3.0, 0.01]])
    a = torch.tensor([0.5, 2.0, 4.0, 10.0])
    model = GammaFamily()
    program = to_edge(torch.export.export(model, (x, a))).to_executorch()
    outputs = Runtime.get().load_program(program.buffer).load_method("forward").execute([x.numpy(), a.numpy()])
    expected = model(x, a)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(got, want.numpy(), rtol=1.3e-6, atol=1e-5)
