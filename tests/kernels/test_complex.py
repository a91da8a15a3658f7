"""Complex tensors through the portable kernels, against eager: elementwise math, reductions,
conjugates, building and viewing complex tensors, eigen decompositions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.kernels.harness import Case, rand, run_case, run_case_and_shape
from torchedge.kernels.registry import get_kernel

aten = torch.ops.aten
C64, C128 = torch.complex64, torch.complex128
COMPLEX = [C64, C128]
# complex64 math in NumPy and ATen differs in the last bits (different formulas for the parts)
CLOSE = {C64: {"rtol": 2e-5, "atol": 2e-6}, C128: {"rtol": 1e-12, "atol": 1e-14}}


def crand(*shape, dtype=C64, low=-2.0, high=2.0) -> torch.Tensor:
    """Random complex values with both parts uniform in [low, high)."""
    real = torch.float32 if dtype == C64 else torch.float64
    return torch.complex(rand(*shape, dtype=real, low=low, high=high), rand(*shape, dtype=real, low=low, high=high))


UNARY = [
    "neg", "sqrt", "rsqrt", "reciprocal", "exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid",
]  # fmt: skip


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name", UNARY)
def test_unary_math_on_complex_matches_eager(name, dtype):
    # parts away from 0 and the branch cuts, where the formulas agree to the last bits
    x = crand(3, 5, dtype=dtype, low=0.2, high=1.5) * torch.tensor([1, -1, 1j, -1j, 1], dtype=dtype)
    run_case_and_shape(f"aten::{name}.out", getattr(torch, name), x, **CLOSE[dtype])


@pytest.mark.parametrize("dtype", COMPLEX)
def test_abs_of_complex_is_real(dtype):
    run_case_and_shape("aten::abs.out", torch.abs, crand(4, 3, dtype=dtype), **CLOSE[dtype])


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize(
    ("op", "ref", "extra"),
    [
        ("aten::add.out", lambda a, b, alpha: torch.add(a, b, alpha=alpha), (2,)),
        ("aten::sub.out", lambda a, b, alpha: torch.sub(a, b, alpha=alpha), (1,)),
        ("aten::mul.out", torch.mul, ()),
        ("aten::div.out", torch.div, ()),
        ("aten::pow.Tensor_Tensor_out", torch.pow, ()),
    ],
)
def test_binary_math_on_complex_matches_eager(op, ref, extra, dtype):
    a, b = crand(3, 4, dtype=dtype, low=0.3), crand(4, dtype=dtype, low=0.3)
    run_case_and_shape(op, ref, a, b, *extra, **CLOSE[dtype])
    run_case_and_shape(op, ref, a, rand(3, 1, dtype=torch.float32, low=0.5), *extra, **CLOSE[dtype])


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("scalar", [2, 0.5, 1.5 - 0.5j])
def test_complex_with_python_scalars(scalar, dtype):
    x = crand(2, 3, dtype=dtype, low=0.3)
    run_case(Case("aten::mul.Scalar_out", torch.mul, (x, scalar), **CLOSE[dtype]))
    run_case(
        Case("aten::add.Scalar_out", lambda a, b, alpha: torch.add(a, b, alpha=alpha), (x, scalar, 3), **CLOSE[dtype])
    )
    run_case(Case("aten::pow.Tensor_Scalar_out", torch.pow, (x, scalar), **CLOSE[dtype]))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_variance_of_complex_is_real(dtype):
    x = crand(3, 6, dtype=dtype)
    run_case_and_shape(
        "aten::var.correction_out", lambda t, d, c, k: torch.var(t, d, correction=c, keepdim=k), x, [1], 1, True
    )
    run_case_and_shape(
        "aten::std.correction_out", lambda t, d, c, k: torch.std(t, d, correction=c, keepdim=k), x, None, 0, False
    )


@pytest.mark.parametrize("dtype", [*COMPLEX, torch.float32, torch.int64])
@pytest.mark.parametrize("op", ["aten::_conj_copy.out", "aten::_conj_physical.out", "aten::conj_physical.out"])
def test_conjugate(op, dtype):
    x = crand(2, 5, dtype=dtype) if dtype.is_complex else rand(2, 5, dtype=dtype)
    run_case_and_shape(op, lambda t: torch.conj_physical(t), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_complex_and_polar_build_from_parts(dtype):
    a, b = rand(3, 1, dtype=dtype, low=0.0), rand(4, dtype=dtype)
    run_case_and_shape("aten::complex.out", torch.complex, a, b)
    run_case_and_shape("aten::polar.out", torch.polar, a, b, rtol=1e-6, atol=1e-7)


def test_complex_refuses_what_eager_refuses():
    run_case(Case("aten::complex.out", torch.complex, (rand(3), rand(3, dtype=torch.float64))))
    run_case(Case("aten::complex.out", torch.complex, (rand(3, dtype=torch.int64), rand(3, dtype=torch.int64))))
    run_case(Case("aten::view_as_complex_copy.out", torch.view_as_complex, (rand(3, 3),)))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_view_as_real_and_back(dtype):
    x = crand(2, 3, dtype=dtype)
    run_case_and_shape("aten::view_as_real_copy.out", torch.view_as_real, x)
    run_case_and_shape("aten::view_as_complex_copy.out", torch.view_as_complex, torch.view_as_real(x).contiguous())


def _eigen_pairs_match(got, want):
    """Eigenvalues as eager orders them; eigenvectors up to a phase (their magnitudes)."""
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.abs(got[1]), np.abs(want[1]), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_linalg_eig_matches_eager(dtype):
    a = torch.tensor([[2.0, -1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.0, 5.0]], dtype=dtype)  # eigenvalues 2+-i, 5
    batch = torch.stack([a, a.T, torch.diag(torch.tensor([3.0, 1.0, 2.0], dtype=dtype))])
    run_case(Case("aten::linalg_eig.out", torch.linalg.eig, (batch,), compare=_eigen_pairs_match))
    complex_dtype = np.complex64 if dtype == torch.float32 else np.complex128
    values, vectors = np.empty(3, complex_dtype), np.empty((3, 3), complex_dtype)
    get_kernel("aten::linalg_eig.out").fn(a.numpy(), values, vectors)
    np.testing.assert_allclose(np.sort_complex(values), [2 - 1j, 2 + 1j, 5], rtol=1e-6)  # by hand
    np.testing.assert_allclose(a.numpy() @ vectors, vectors * values, atol=1e-5)  # A v = lambda v
