"""The orthogonal polynomials of torch.special (Chebyshev T, U, V, W plain and shifted, Hermite H
and He, Laguerre L, Legendre P) against eager: the Tensor, x-Scalar and n-Scalar overloads,
dtype promotion of x and n, negative, fractional, huge, inf and nan degrees, the end points
and both sides of |x| = 1, high degrees (closed forms, overflow), broadcasting, 0-d and empty
tensors, refusals, shape functions, and a program using them end to end."""

import numpy as np
import pytest
import torch

from tests.kernels.harness import Case, run_case, to_kernel_arg
from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

CHEBYSHEV = [f"{shift}chebyshev_polynomial_{kind}" for shift in ("", "shifted_") for kind in "tuvw"]
NAMES = CHEBYSHEV + ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]
XS = [
    1.79,
    -1.79,
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    1e-20,
    -1e-20,
    1 - 1e-7,
    1 + 1e-7,
    0.999,
    1.01,
    -1.03,
    2.5,
    -2.68,
    50.0,
    -50.0,
]
XS += [300.0, 1e30, -1e30, float("inf"), float("-inf")]


def _reference(name, overload="default"):
    return getattr(getattr(torch.ops.aten, f"special_{name}"), overload)


def _grid(dtype, degrees):
    """Every x of a broad set against every degree, as two tensors of the same shape."""
    x = torch.cat([torch.linspace(-3, 3, 121, dtype=torch.float64), torch.tensor(XS, dtype=torch.float64)])
    n = torch.tensor(degrees, dtype=torch.float64)
    return x[None, :].expand(len(degrees), -1).to(dtype), n[:, None].expand(-1, x.numel()).to(dtype)


LOW_DEGREES = list(range(-3, 19)) + [2.7, -0.5, 0.9, 3.99, float("inf"), float("-inf"), float("nan"), 1e30, -1e30]
HIGH_DEGREES = [25, 40, 100, 129, 200, 513, 600]
# degrees above which ATen's Chebyshev polynomials use their closed forms on the open interval
CLOSED_FORM_ABOVE = {"t": 6, "u": 8, "v": 8, "w": 8, "shifted_t": 6, "shifted_u": 6, "shifted_v": 6, "shifted_w": 4}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("degrees", [LOW_DEGREES, HIGH_DEGREES], ids=["low", "high"])
def test_float64_matches_eager(name, degrees):
    run_case(Case(f"aten::special_{name}.out", _reference(name), _grid(torch.float64, degrees)))


def _closed_form_slack(name, x, n, want):
    """Where a Chebyshev polynomial takes its closed form F(acos y), ATen rounds acos, cos and sin
    as glibc's float32 functions do (not always correctly rounded), and F multiplies a one-ulp
    difference in acos by about n / (sin of the angle or of its half): the slack that allows."""
    if "chebyshev" not in name:
        return np.zeros_like(want)
    key = ("shifted_" if name.startswith("shifted") else "") + name[-1]
    y = 2 * x - 1 if key.startswith("shifted") else x
    with np.errstate(invalid="ignore"):
        theta = np.arccos(y)
    closed = (np.abs(y) < 1) & (n > CLOSED_FORM_ABOVE[key]) & np.isfinite(n)
    small = np.minimum.reduce([np.abs(np.sin(theta)), np.sin(theta / 2), np.cos(theta / 2)])
    slack = 4 * np.pi * np.finfo(np.float32).eps * (n + 1) * (np.abs(want) + 1) / np.maximum(small, 1e-3)
    return np.where(closed, slack, 0.0)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("degrees", [LOW_DEGREES, HIGH_DEGREES], ids=["low", "high"])
def test_float32_matches_eager(name, degrees):
    # exact recurrences (ATen's loops contract to FMAs; the kernels round each step once too);
    # the closed forms within the slack their conditioning gives glibc's rounding (see above)
    x, n = _grid(torch.float32, degrees)
    want = to_numpy(_reference(name)(x, n))
    out = np.empty(want.shape, np.float32)
    get_kernel(f"aten::special_{name}.out").fn(to_numpy(x), to_numpy(n), out)
    x64, n64, want64 = (to_numpy(t).astype(np.float64) for t in (x, n, torch.from_numpy(want)))
    slack = _closed_form_slack(name, x64, n64, want64)
    with np.errstate(invalid="ignore"):
        near = np.isclose(out, want, rtol=1e-5, atol=1e-6, equal_nan=True) | (np.abs(out - want64) <= slack)
    assert near.all(), list(zip(x64[~near][:5], n64[~near][:5], out[~near][:5], want[~near][:5]))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("x_dtype", "n_dtype"),
    [
        (torch.int64, torch.int64),
        (torch.int32, torch.int8),
        (torch.bool, torch.int64),
        (torch.uint8, torch.float64),
        (torch.float32, torch.int64),
        (torch.float32, torch.float64),
        (torch.float64, torch.int32),
        (torch.float32, torch.float16),
        (torch.float16, torch.int64),
        (torch.bfloat16, torch.float32),
        (torch.int64, torch.bfloat16),
    ],
)
def test_dtype_promotion_and_refusals(name, x_dtype, n_dtype):
    x = torch.tensor([0, 1, 2, 3, -1, -2, 1, 0])
    x = (x != 0) if x_dtype == torch.bool else x.to(x_dtype)
    n = torch.tensor([-1, 0, 1, 2, 3, 5, 7, 12]).to(n_dtype)
    run_case(Case(f"aten::special_{name}.out", _reference(name), (x, n)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("x", [0.5, -0.3, 2, True, 1, 0, -1.5, float("inf")])
def test_scalar_x(name, x):
    n = torch.tensor([-2, 0, 1, 2, 3, 6, 9, 14])
    run_case(Case(f"aten::special_{name}.x_scalar_out", _reference(name, "x_scalar"), (x, n)))
    run_case(Case(f"aten::special_{name}.x_scalar_out", _reference(name, "x_scalar"), (x, n.double())))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [-1, 0, 1, 2, 5, 10, 3.7, True])
def test_scalar_n(name, n):
    x = torch.linspace(-1.5, 1.5, 31)
    run_case(Case(f"aten::special_{name}.n_scalar_out", _reference(name, "n_scalar"), (x, n)))
    run_case(Case(f"aten::special_{name}.n_scalar_out", _reference(name, "n_scalar"), (x.double(), n)))
    run_case(Case(f"aten::special_{name}.n_scalar_out", _reference(name, "n_scalar"), (torch.arange(-3, 4), n)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("x_shape", "n_shape"), [((), ()), ((0,), (1,)), ((3, 1), (4,)), ((2, 0, 3), ()), ((), (5,))])
def test_broadcasting_zero_dim_empty_and_shape_function(name, x_shape, n_shape):
    x = torch.rand(x_shape, dtype=torch.float64) * 3 - 1.5
    n = torch.randint(-1, 9, n_shape)
    run_case(Case(f"aten::special_{name}.out", _reference(name), (x, n)))
    want = _reference(name)(x, n)
    out = np.empty(tuple(want.shape), np.float64)
    assert output_shapes(f"aten::special_{name}.out", [to_kernel_arg(x), to_kernel_arg(n), out]) == [want.shape]
    scalar = _reference(name, "n_scalar")(x, 3)
    assert output_shapes(f"aten::special_{name}.n_scalar_out", [to_kernel_arg(x), 3, out]) == [scalar.shape]
    scalar = _reference(name, "x_scalar")(0.5, n)
    assert output_shapes(f"aten::special_{name}.x_scalar_out", [0.5, to_kernel_arg(n), out]) == [scalar.shape]


@pytest.mark.parametrize("name", NAMES)
def test_nan_x_gives_nan(name):
    # for degrees 2 and more some of ATen's loops return a value they never set when x is nan
    # (its result is then arbitrary); the kernels give nan
    out = np.empty(4)
    get_kernel(f"aten::special_{name}.out").fn(np.full(4, np.nan), np.array([1.0, 2, 5, 30]), out)
    assert np.isnan(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_integer_out_is_refused(name):
    with pytest.raises(RuntimeError):
        _reference(name, "out")(torch.ones(2), torch.ones(2), out=torch.empty(2, dtype=torch.int64))
    with pytest.raises(KernelError, match="can't be cast"):
        get_kernel(f"aten::special_{name}.out").fn(np.ones(2, np.float32), np.ones(2), np.empty(2, np.int64))


class Polynomials(torch.nn.Module):
    def forward(self, x, n):
        s = torch.special
        return (
            s.chebyshev_polynomial_t(x, n),
            s.chebyshev_polynomial_u(x, 3),
            s.chebyshev_polynomial_v(0.25, n),
            s.chebyshev_polynomial_w(x, n),
            s.shifted_chebyshev_polynomial_t(x, 12),
            s.shifted_chebyshev_polynomial_u(x, n),
            s.shifted_chebyshev_polynomial_v(x, n),
            s.shifted_chebyshev_polynomial_w(x, 2.0),
            s.hermite_polynomial_h(x, n),
            s.hermite_polynomial_he(-0.5, n),
            s.laguerre_polynomial_l(x, n),
            s.legendre_polynomial_p(x * 2, n),
        )


def test_program_using_the_family_matches_eager():
    torch.manual_seed(0)
    inputs = (torch.rand(3, 6) * 2 - 1, torch.tensor([0, 1, 2, 5, 9, 11]))
    program = to_edge(torch.export.export(Polynomials(), inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = Polynomials()(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == to_numpy(w).dtype and g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, to_numpy(w), rtol=1.3e-6, atol=1e-5, equal_nan=True)
