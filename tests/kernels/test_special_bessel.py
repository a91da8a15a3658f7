"""The Bessel family of torch.special (i0, i0e, i1, i1e, J0, J1, Y0, Y1, modified I0, I1, K0, K1,
scaled K0, K1, spherical j0, Airy Ai) against eager: every dtype eager takes (and refuses),
small, large, negative, zero, inf and nan inputs, 0-d and empty tensors, out dtypes, shape
functions, and a program using them end to end."""

import numpy as np
import pytest
import torch

from tests.kernels.harness import Case, run_case, to_kernel_arg
from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

HALF_OK = ["i0", "special_i0e", "special_i1", "special_i1e"]
FLOAT_ONLY = [
    "special_bessel_j0",
    "special_bessel_j1",
    "special_bessel_y0",
    "special_bessel_y1",
    "special_modified_bessel_i0",
    "special_modified_bessel_i1",
    "special_modified_bessel_k0",
    "special_modified_bessel_k1",
    "special_scaled_modified_bessel_k0",
    "special_scaled_modified_bessel_k1",
    "special_spherical_bessel_j0",
    "special_airy_ai",
]
NAMES = HALF_OK + FLOAT_ONLY
INTS = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
EDGES = [0.0, -0.0, 1e-5, 0.99999e-5, 0.5, 2.0, 2.09, -2.09, 5.0, 8.0, 8.0001, 88.7, 89.0, 90.0, 103.892, 103.9]
EDGES += [700.0, 710.0, 720.0, 1e4 + 0.3, 1e6, 1e8, 1e30, float("inf"), float("-inf"), float("nan")]


def _reference(name):
    return getattr(torch.ops.aten, name).default


def _floats(dtype) -> torch.Tensor:
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            np.linspace(-30, 30, 1201),
            np.linspace(-200, 200, 401),
            np.geomspace(1e-30, 1e30, 241),
            -np.geomspace(1e-30, 1e30, 241),
            rng.standard_normal(200) * 6,
            EDGES,
            [-v for v in EDGES],
        ]
    )
    return torch.from_numpy(values).to(dtype)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_floats_match_eager_over_the_domain(name, dtype):
    run_case(Case(f"aten::{name}.out", _reference(name), (_floats(dtype),)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", INTS)
def test_integers_and_bool_compute_in_float32(name, dtype):
    if dtype == torch.bool:
        x = torch.tensor([True, False, True])
    elif dtype == torch.uint8:
        x = torch.arange(0, 256).to(dtype)
    else:
        info = torch.iinfo(dtype)
        x = torch.cat([torch.arange(-60, 61), torch.tensor([info.min, info.max])]).to(dtype)
    run_case(Case(f"aten::{name}.out", _reference(name), (x,)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_as_eager_computes_or_refuses_it(name, dtype):
    # i0, i0e, i1 and i1e compute 16-bit floats in float32; the others refuse them, as eager does
    run_case(Case(f"aten::{name}.out", _reference(name), (torch.linspace(-12, 12, 97).to(dtype),)))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (3, 1, 2)])
def test_shapes_zero_dim_and_empty(name, shape):
    x = torch.rand(shape, dtype=torch.float64) * 12 - 3
    want = _reference(name)(x)
    run_case(Case(f"aten::{name}.out", _reference(name), (x,)))
    out = np.empty(tuple(want.shape), to_numpy(want).dtype)
    assert output_shapes(f"aten::{name}.out", [to_kernel_arg(x), out]) == [tuple(want.shape)]


@pytest.mark.parametrize("name", NAMES)
def test_wider_out_gets_the_result_computed_in_the_input_dtype(name):
    x = torch.tensor([0.3, 1.5, 4.0, 9.5, 50.5, 95.0, 1e4 + 0.3])
    want = torch.empty(x.shape, dtype=torch.float64)
    getattr(torch.ops.aten, name).out(x, out=want)
    out = np.empty(x.shape, np.float64)
    get_kernel(f"aten::{name}.out").fn(to_numpy(x), out)
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-7, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("name", NAMES)
def test_integer_out_is_refused(name):
    with pytest.raises(RuntimeError):
        getattr(torch.ops.aten, name).out(torch.ones(2), out=torch.empty(2, dtype=torch.int64))
    with pytest.raises(KernelError, match="can't be cast"):
        get_kernel(f"aten::{name}.out").fn(np.ones(2, np.float32), np.empty(2, np.int64))


def test_kernel_is_exact_with_out_aliasing_self():
    for name in NAMES:
        x = _floats(torch.float64)
        buffer = to_numpy(x).copy()
        get_kernel(f"aten::{name}.out").fn(buffer, buffer)
        np.testing.assert_allclose(buffer, to_numpy(_reference(name)(x)), rtol=1e-7, atol=1e-7, equal_nan=True)


class Bessels(torch.nn.Module):
    def forward(self, x, y):
        s = torch.special
        return (
            torch.i0(x),
            s.i0e(x),
            s.i1(x) + s.i1e(y),
            s.bessel_j0(x) * s.bessel_j1(y),
            s.bessel_y0(x.abs()),
            s.bessel_y1(y.abs() + 0.1),
            s.modified_bessel_i0(x) - s.modified_bessel_i1(y),
            s.modified_bessel_k0(x.abs()),
            s.modified_bessel_k1(y.abs()),
            s.scaled_modified_bessel_k0(x.abs() + 1) + s.scaled_modified_bessel_k1(y.abs() + 1),
            s.spherical_bessel_j0(x * 3),
            s.airy_ai(y * 4),
        )


def test_program_using_the_family_matches_eager():
    torch.manual_seed(0)
    inputs = (torch.randn(3, 5) * 4, torch.randn(5) * 4)
    program = to_edge(torch.export.export(Bessels(), inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = Bessels()(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == to_numpy(w).dtype and g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, to_numpy(w), rtol=1.3e-6, atol=1e-5, equal_nan=True)
