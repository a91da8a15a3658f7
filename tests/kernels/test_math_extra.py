"""Bit and float math kernels (shifts, gcd/lcm, signbit, hypot, copysign, nextafter, fmax/fmin,
frexp, ldexp, angle) against PyTorch eager: dtypes, edge values, shapes, and a program."""

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import ALL, BF16, F16, F32, F64, FLOATS, I8, I16, I32, I64, INTS, U8, B, Case, rand, run_case
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import output_shapes
from torchedge.runtime import Runtime

aten = torch.ops.aten
nan, inf = math.nan, math.inf
T = torch.tensor


def _shift_values(dtype):
    info = torch.iinfo(dtype)
    a = T([1, 5, info.max, info.min, 0, 3, info.max, info.min, 7, 1], dtype=dtype)
    bits = info.bits
    counts = [0, 1, bits - 1, bits - 1, bits, bits + 3, 2, 1, -1 if info.min < 0 else 200, -bits]
    b = T([c % (1 << bits) if info.min == 0 else max(min(c, info.max), info.min) for c in counts], dtype=dtype)
    return a, b


def _shift_cases():
    for name in ["bitwise_left_shift", "bitwise_right_shift"]:
        op = getattr(aten, name)
        for dtype in INTS:
            a, b = _shift_values(dtype)
            yield Case(f"aten::{name}.Tensor_out", op.Tensor, (a, b), id=f"{name}-edges-{dtype}").param()
            x, y = rand(3, 4, dtype=dtype, low=-100, high=100), rand(4, dtype=dtype, low=0, high=9)
            yield Case(f"aten::{name}.Tensor_out", op.Tensor, (x, y), id=f"{name}-bcast-{dtype}").param()
            for s in [0, 3, 7, 9, 64, 300, -2]:
                yield Case(
                    f"aten::{name}.Tensor_Scalar_out", op.Tensor_Scalar, (x, s), id=f"{name}-s{s}-{dtype}"
                ).param()
            yield Case(f"aten::{name}.Scalar_Tensor_out", op.Scalar_Tensor, (3, y), id=f"{name}-st-{dtype}").param()
        mixed = (rand(5, dtype=I8, low=-9, high=9), rand(5, dtype=I64, low=0, high=70))
        yield Case(f"aten::{name}.Tensor_out", op.Tensor, mixed, id=f"{name}-promote").param()
        for dtype in [F32, B]:  # eager refuses floats and bool
            yield Case(
                f"aten::{name}.Tensor_out",
                op.Tensor,
                (rand(3, dtype=dtype), rand(3, dtype=dtype)),
                id=f"{name}-{dtype}",
            ).param()
        yield Case(
            f"aten::{name}.Tensor_Scalar_out", op.Tensor_Scalar, (rand(3, dtype=I32), 1.5), id=f"{name}-float-scalar"
        ).param()
    for name, op in [("__lshift__", aten.__lshift__), ("__rshift__", aten.__rshift__)]:
        yield Case(f"aten::{name}.Scalar_out", op.Scalar, (T([True, False]), 1), id=f"{name}-bool").param()
        x = rand(4, dtype=I16, low=-500, high=500)
        yield Case(f"aten::{name}.Tensor_out", op.Tensor, (x, T([0, 3, 15, 16], dtype=I16)), id=name).param()


def _gcd_cases():
    for name in ["gcd", "lcm"]:
        op = getattr(aten, name).default
        for dtype in INTS:
            info = torch.iinfo(dtype)
            a = T([0, 0, 12, info.min, info.min, info.max, 6, 100, min(200, info.max)], dtype=dtype)
            b = T([0, 5, 18, 0, 6, 3, info.max, 3, 3], dtype=dtype)
            yield Case(f"aten::{name}.out", op, (a, b), id=f"{name}-edges-{dtype}").param()
            x, y = rand(4, 6, dtype=dtype, low=-60, high=60), rand(6, dtype=dtype, low=-60, high=60)
            yield Case(f"aten::{name}.out", op, (x, y), id=f"{name}-bcast-{dtype}").param()
        big = (T([100000, -(2**31), 300], dtype=I32), T([30001, 3, -301], dtype=I32))
        yield Case(f"aten::{name}.out", op, big, id=f"{name}-int32-wrap").param()
        yield Case(f"aten::{name}.out", op, (T([300], dtype=I16), T([-301], dtype=I16)), id=f"{name}-int16").param()
        for dtype in [B, F32]:
            yield Case(
                f"aten::{name}.out", op, (rand(3, dtype=dtype), rand(3, dtype=dtype)), id=f"{name}-{dtype}"
            ).param()


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.75, 1e-40, -1e-40, 1e30, inf, -inf, nan, 65504.0, 1e-7]


def _float_cases():
    special = T(SPECIAL)
    other = T([-0.0, 0.0, 1.0, 2.0, -2.5, -3.75, inf, -1e-40, nan, inf, nan, 1.0, 1.0, -0.0])
    for name, ref in [
        ("hypot", aten.hypot.default),
        ("copysign", aten.copysign.Tensor),
        ("nextafter", aten.nextafter.default),
        ("fmax", aten.fmax.default),
        ("fmin", aten.fmin.default),
    ]:
        op = f"aten::{name}.out"
        for dtype in ALL:
            x, y = rand(3, 5, dtype=dtype), rand(5, dtype=dtype)
            yield Case(op, ref, (x, y), id=f"{name}-bcast-{dtype}").param()
        for dtype in FLOATS:
            yield Case(op, ref, (special.to(dtype), other.to(dtype)), id=f"{name}-special-{dtype}").param()
        yield Case(op, ref, (rand(4, dtype=F16), rand(4, dtype=F64)), id=f"{name}-promote").param()
        yield Case(op, ref, (rand(4, dtype=I32), rand(4, dtype=F32)), id=f"{name}-int-float").param()
        yield Case(op, ref, (rand(0, 3), rand(3)), id=f"{name}-empty").param()
        yield Case(op, ref, (T(2.0), rand(3)), id=f"{name}-0dim").param()
    zeros = (T([0.0, -0.0, 0.0, -0.0] * 5), T([-0.0, 0.0, 0.0, -0.0] * 5))
    for name in ["fmax", "fmin"]:
        yield Case(f"aten::{name}.out", getattr(aten, name).default, zeros, id=f"{name}-signed-zeros").param()
    for s in [-1.0, 2.0, -0.0, nan]:
        for dtype in [F32, F16, I32, B]:
            x = rand(4, dtype=dtype)
            yield Case("aten::copysign.Scalar_out", aten.copysign.Scalar, (x, s), id=f"copysign-s{s}-{dtype}").param()
    for dtype in ALL:
        x = rand(3, 4, dtype=dtype)
        yield Case("aten::signbit.out", aten.signbit.default, (x,), id=f"signbit-{dtype}").param()
        yield Case("aten::angle.out", aten.angle.default, (x,), id=f"angle-{dtype}").param()
        yield Case("aten::frexp.Tensor_out", aten.frexp.Tensor, (x,), id=f"frexp-{dtype}").param()
    for dtype in FLOATS:
        yield Case(
            "aten::signbit.out", aten.signbit.default, (special.to(dtype),), id=f"signbit-special-{dtype}"
        ).param()
        yield Case("aten::angle.out", aten.angle.default, (special.to(dtype),), id=f"angle-special-{dtype}").param()
        yield Case(
            "aten::frexp.Tensor_out", aten.frexp.Tensor, (special.to(dtype),), id=f"frexp-special-{dtype}"
        ).param()
    yield Case("aten::signbit.out", aten.signbit.default, (T([nan]).neg(),), id="signbit-negative-nan").param()
    for dtype in [U8, I8, I32]:
        yield Case(
            "aten::angle.out", aten.angle.default, (T([-1, 0, 5], dtype=dtype),), id=f"angle-sign-{dtype}"
        ).param()


def _ldexp_cases():
    exps = T([0, 3, -3, 200, -200, -140, 1000, -1100, 5, -(2**40)])
    base = T([1.0, 1.5, -2.0, 1e30, 1e30, 3.0, 1e-300, 1e300, nan, inf])
    for dtype in FLOATS:
        yield Case("aten::ldexp.out", aten.ldexp.Tensor, (base.to(dtype), exps), id=f"ldexp-{dtype}").param()
        yield Case("aten::ldexp.out", aten.ldexp.Tensor, (base.to(dtype), exps.to(I8)), id=f"ldexp-i8-{dtype}").param()
    for dtype in [I32, B, U8]:
        yield Case("aten::ldexp.out", aten.ldexp.Tensor, (rand(5, dtype=dtype), exps[:5]), id=f"ldexp-{dtype}").param()
    yield Case("aten::ldexp.out", aten.ldexp.Tensor, (rand(3, 4), rand(4, dtype=F64)), id="ldexp-float-exp").param()
    yield Case(
        "aten::ldexp.out", aten.ldexp.Tensor, (rand(3, dtype=F16), rand(3, dtype=F32)), id="ldexp-f16-f32"
    ).param()
    yield Case("aten::ldexp.out", aten.ldexp.Tensor, (rand(3, dtype=F32), T(4)), id="ldexp-0dim-exp").param()
    wrapped = (T([1.0, 1.0, 1.5, 1e-45]), T([2**32 + 3, 128, -149, 200]))  # C's int exponent; one rounding
    yield Case("aten::ldexp.out", aten.ldexp.Tensor, wrapped, id="ldexp-int32-exponent").param()
    yield Case("aten::ldexp.out", aten.ldexp.Tensor, (T([1, 3, 0]), T([130, -150, 200])), id="ldexp-int-self").param()


@pytest.mark.parametrize("case", [*_shift_cases(), *_gcd_cases(), *_float_cases(), *_ldexp_cases()])
def test_math_extra_matches_eager(case):
    run_case(case)


@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64])
def test_nextafter_steps_one_ulp_every_way(dtype):
    tiny = torch.finfo(dtype).tiny
    x = T([1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, tiny, -tiny, 3.0, inf, -inf, nan, 2.0], dtype=dtype)
    y = T([2.0, 0.0, 2.0, -2.0, 1.0, -1.0, -0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 1.0, nan], dtype=dtype)
    run_case(Case("aten::nextafter.out", aten.nextafter.default, (x, y)))


@pytest.mark.parametrize(
    ("op", "ref", "args"),
    [
        ("aten::gcd.out", aten.gcd.default, [np.ones((2, 1), np.int32), np.ones(3, np.int32)]),
        ("aten::lcm.out", aten.lcm.default, [np.ones((2, 1), np.int32), np.ones(3, np.int32)]),
        ("aten::hypot.out", aten.hypot.default, [np.ones((4, 1, 3)), np.ones((2, 1))]),
        ("aten::fmax.out", aten.fmax.default, [np.ones((4, 1, 3)), np.ones((2, 1))]),
        ("aten::ldexp.out", aten.ldexp.Tensor, [np.ones((4, 1, 3)), np.ones((2, 1), np.int64)]),
        (
            "aten::bitwise_left_shift.Tensor_Scalar_out",
            aten.bitwise_left_shift.Tensor_Scalar,
            [np.ones((2, 3), np.int8), 2],
        ),
        (
            "aten::bitwise_right_shift.Scalar_Tensor_out",
            aten.bitwise_right_shift.Scalar_Tensor,
            [2, np.ones((5,), np.int8)],
        ),
        ("aten::signbit.out", aten.signbit.default, [np.ones((2, 0))]),
        ("aten::angle.out", aten.angle.default, [np.ones(())]),
    ],
)
def test_shape_functions_match_eager(op, ref, args):
    expected = ref(*[torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args])
    assert output_shapes(op, [*args, np.empty(0)]) == [tuple(expected.shape)]


def test_frexp_shape_matches_eager():
    x = torch.randn(3, 0, 2)
    mantissa, exponent = torch.frexp(x)
    shapes = output_shapes("aten::frexp.Tensor_out", [x.numpy(), np.empty(0), np.empty(0, np.int32)])
    assert shapes == [tuple(mantissa.shape), tuple(exponent.shape)]


class MathModule(torch.nn.Module):
    def forward(self, x, y, i, j):
        mantissa, exponent = torch.frexp(x)
        return (
            torch.bitwise_left_shift(i, j) + (i >> 2) + torch.gcd(i, j) + torch.lcm(i, j) + (i << j),
            torch.hypot(x, y) + torch.copysign(x, y) + torch.copysign(x, -1.0) + torch.nextafter(x, y),
            torch.fmax(x, y) - torch.fmin(x, y) + torch.angle(x) + torch.ldexp(x, j),
            torch.signbit(x),
            mantissa,
            exponent,
        )


def test_math_program_runs_like_eager():
    x = T([1.5, -2.0, nan, -0.0, 3.0, inf])
    y = T([0.5, nan, 1.0, 2.0, -3.0, 1.0])
    i = T([3, -12, 7, 0, 100, -5], dtype=I64)
    j = T([1, 2, 65, 0, 3, 4], dtype=I64)
    inputs = (x, y, i, j)
    buffer = to_edge(torch.export.export(MathModule(), inputs)).to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method("forward")
    got = method.execute([to_numpy(t) for t in inputs])
    for g, w in zip(got, MathModule()(*inputs)):
        np.testing.assert_allclose(np.asarray(g), to_numpy(w), rtol=1.3e-6, atol=1e-5, equal_nan=True)
        assert np.asarray(g).dtype == to_numpy(w).dtype
