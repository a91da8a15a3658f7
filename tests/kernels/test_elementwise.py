"""Elementwise kernels (arithmetic, math, comparisons, activations) against PyTorch."""

import math

import pytest
import torch

from tests.kernels.harness import Case, positive, rand, run_case

aten = torch.ops.aten
F16, F32, F64, I32, I64, B = torch.float16, torch.float32, torch.float64, torch.int32, torch.int64, torch.bool
FLOATS = [F32, F64, F16]
ALL = [F32, F64, F16, I32, I64, B]


def _unary_cases():
    table = [  # op, reference, input maker
        ("neg", aten.neg.default, rand),
        ("abs", aten.abs.default, rand),
        ("sqrt", aten.sqrt.default, positive),
        ("rsqrt", aten.rsqrt.default, positive),
        ("exp", aten.exp.default, rand),
        ("log", aten.log.default, positive),
        ("sin", aten.sin.default, rand),
        ("cos", aten.cos.default, rand),
        ("tanh", aten.tanh.default, rand),
        ("sigmoid", aten.sigmoid.default, rand),
        ("erf", aten.erf.default, rand),
        ("relu", aten.relu.default, rand),
        ("logical_not", aten.logical_not.default, rand),
    ]
    for name, ref, make in table:
        for dtype in ALL:
            yield Case(f"aten::{name}.out", ref, (make(4, 5, dtype=dtype),), id=f"{name}-{dtype}").param()
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, 30.0, -30.0, 100.0])
    for name in ["neg", "abs", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "erf", "relu"]:
        yield Case(f"aten::{name}.out", getattr(aten, name).default, (special,), id=f"{name}-special").param()
    yield Case("aten::exp.out", aten.exp.default, (rand(0, 3),), id="exp-empty").param()
    yield Case("aten::sigmoid.out", aten.sigmoid.default, (torch.tensor(0.3),), id="sigmoid-0dim").param()
    wide = torch.linspace(-7, 7, 20001, dtype=F64)
    yield Case("aten::erf.out", aten.erf.default, (wide,), id="erf-wide-f64").param()
    yield Case("aten::erf.out", aten.erf.default, (wide.float(),), id="erf-wide-f32").param()
    tiny = torch.logspace(-300, 0, 200, dtype=F64)
    yield Case("aten::erf.out", aten.erf.default, (tiny,), rtol=1e-13, atol=1e-300, id="erf-tiny-relative").param()


def _binary_cases():
    table = [  # op names (tensor overload, scalar overload), reference, makers for self and other
        ("add", lambda a, b, alpha: aten.add(a, b, alpha=alpha), True),
        ("sub", lambda a, b, alpha: aten.sub(a, b, alpha=alpha), True),
        ("mul", aten.mul, False),
        ("div", aten.div, False),
        ("minimum", aten.minimum, False),
        ("maximum", aten.maximum, False),
        ("bitwise_and", aten.bitwise_and, False),
        ("bitwise_or", aten.bitwise_or, False),
        ("logical_and", aten.logical_and, False),
        ("logical_or", aten.logical_or, False),
    ]
    pairs = [  # (self, other) covering broadcasting and promotion
        (rand(3, 4), rand(3, 4)),
        (rand(3, 1, 4, dtype=F64), rand(5, 1)),
        (rand(2, 3, dtype=F16), rand(2, 3, dtype=F16)),
        (rand(2, 3, dtype=I32), rand(3, dtype=F32)),
        (rand(4, 2, dtype=I64, low=1, high=9), rand(4, 2, dtype=I32, low=1, high=9)),
        (rand(3, 2, dtype=B), rand(3, 2, dtype=B)),
        (rand(3, 2, dtype=B), rand(3, 2, dtype=I32, low=1, high=5)),
        (rand(2, 3, dtype=I32, low=1, high=5), torch.tensor(2.5, dtype=F64)),  # 0-dim of higher category
        (rand(2, 3, dtype=F16), torch.tensor(2.0, dtype=F64)),  # 0-dim of the same category: ignored
        (rand(0, 3), rand(3)),
    ]
    for name, ref, alpha in table:
        op = (
            f"aten::{name}.out"
            if name.startswith(("add", "sub", "mul", "div", "min", "max", "log"))
            else f"aten::{name}.Tensor_out"
        )
        for i, (a, b) in enumerate(pairs):
            args = (a, b, 2) if alpha else (a, b)
            if name == "div":
                b = b.abs() + 1 if not b.dtype == B else b
                args = (a, b)
            yield Case(op, ref, args, id=f"{name}-{i}").param()
    scalar_table = [
        ("add.Scalar_out", lambda a, b, alpha: aten.add(a, b, alpha=alpha), True),
        ("sub.Scalar_out", lambda a, b, alpha: aten.sub(a, b, alpha=alpha), True),
        ("rsub.Scalar_out", lambda a, b, alpha: aten.rsub(a, b, alpha=alpha), True),
        ("mul.Scalar_out", aten.mul, False),
        ("div.Scalar_out", aten.div, False),
        ("bitwise_and.Scalar_out", aten.bitwise_and, False),
    ]
    for name, ref, alpha in scalar_table:
        for a in [rand(3, 4), rand(3, 4, dtype=I32), rand(3, 4, dtype=F16), rand(3, 4, dtype=B)]:
            for scalar in [2, 2.5, True]:
                args = (a, scalar, 3) if alpha else (a, scalar)
                yield Case(f"aten::{name}", ref, args, id=f"{name}-{a.dtype}-{scalar!r}").param()


def _division_cases():
    a = torch.tensor([[7.0, -7.0, 7.5, -7.5, 0.0, 1.0], [3.0, -3.0, 5.0, -5.0, 2.0, 9.0]])
    b = torch.tensor([[2.0, 2.0, -2.0, -2.0, 0.0, 0.0], [3.0, 2.0, -2.0, 3.0, 0.5, -4.0]])
    ints = torch.tensor([[7, -7, 7, -7, 0, 9], [6, 5, -5, -6, 1, 3]])
    divisors = torch.tensor([[2, 2, -2, -2, 3, -4], [4, 3, 3, 4, -1, 3]])
    for mode in [None, "trunc", "floor"]:
        ref = lambda x, y, m: aten.div.Tensor_mode(x, y, rounding_mode=m)  # noqa: E731
        for i, (x, y) in enumerate(
            [
                (a, b),
                (ints, divisors),
                (ints.int(), divisors),
                (a.double(), divisors),
                (ints.to(torch.uint8), divisors.abs().to(torch.uint8)),
            ]
        ):
            yield Case("aten::div.out_mode", ref, (x, y, mode), id=f"div-{mode}-{i}").param()
        scalar_ref = lambda x, y, m: aten.div.Scalar_mode(x, y, rounding_mode=m)  # noqa: E731
        yield Case("aten::div.Scalar_mode_out", scalar_ref, (ints, -2, mode), id=f"div-scalar-{mode}").param()
    yield Case(
        "aten::div.out_mode",
        lambda x, y, m: aten.div.Tensor_mode(x, y, rounding_mode=m),
        (ints, torch.zeros_like(ints), "floor"),
        id="div-int-by-zero",
    ).param()


def _power_cases():
    base = positive(3, 4)
    yield Case("aten::pow.Tensor_Scalar_out", aten.pow.Tensor_Scalar, (base, 2.5), id="pow-ts-float").param()
    yield Case("aten::pow.Tensor_Scalar_out", aten.pow.Tensor_Scalar, (base, 2), id="pow-ts-int").param()
    yield Case("aten::pow.Tensor_Scalar_out", aten.pow.Tensor_Scalar, (base.half(), 0.5), id="pow-ts-half").param()
    ints = rand(3, 4, dtype=I64, low=-3, high=3)
    yield Case("aten::pow.Tensor_Scalar_out", aten.pow.Tensor_Scalar, (ints, 3), id="pow-ts-int64").param()
    yield Case("aten::pow.Tensor_Scalar_out", aten.pow.Tensor_Scalar, (ints, 0.5), id="pow-ts-int-float").param()
    yield Case("aten::pow.Tensor_Scalar_out", aten.pow.Tensor_Scalar, (ints, -1), id="pow-ts-int-negative").param()
    yield Case("aten::pow.Tensor_Tensor_out", aten.pow.Tensor_Tensor, (base, rand(4)), id="pow-tt").param()
    exps = torch.tensor([[-1, -2, 0, 3], [2, -3, 1, -1], [0, 0, -2, 5]])
    signed = torch.tensor([[2, 1, -1, -2], [-1, -1, 0, 0], [3, 1, -1, 2]])
    yield Case("aten::pow.Tensor_Tensor_out", aten.pow.Tensor_Tensor, (signed, exps), id="pow-tt-int-neg").param()
    yield Case("aten::pow.Scalar_out", aten.pow.Scalar, (2, exps), id="pow-scalar-base").param()
    yield Case("aten::pow.Scalar_out", aten.pow.Scalar, (1.5, base), id="pow-scalar-float-base").param()


def _comparison_cases():
    nan = torch.tensor([[1.0, float("nan"), 2.0], [float("inf"), -1.0, 0.0]])
    for name in ["eq", "ne", "lt", "le", "gt", "ge"]:
        ref_t, ref_s = getattr(aten, name).Tensor, getattr(aten, name).Scalar
        for i, (a, b) in enumerate(
            [
                (rand(3, 4, dtype=I32, low=0, high=3), rand(4, dtype=I32, low=0, high=3)),
                (rand(2, 3), rand(2, 1)),
                (nan, nan.flip(0)),
                (rand(2, 3, dtype=I64), rand(2, 3, dtype=F16)),
                (rand(2, 2, dtype=B), rand(2, 2, dtype=B)),
            ]
        ):
            yield Case(f"aten::{name}.Tensor_out", ref_t, (a, b), id=f"{name}-t{i}").param()
        for i, (a, s) in enumerate(
            [(rand(2, 3, dtype=I32), 1), (rand(2, 3, dtype=I32), 0.5), (nan, 1.0), (rand(2, 3, dtype=B), True)]
        ):
            yield Case(f"aten::{name}.Scalar_out", ref_s, (a, s), id=f"{name}-s{i}").param()


def _selection_cases():
    x = torch.tensor([[-2.0, 0.5, float("nan")], [3.0, -0.1, 1.0]])
    yield Case("aten::clamp.out", aten.clamp.default, (x, -1.0, 0.75), id="clamp").param()
    yield Case("aten::clamp.out", aten.clamp.default, (x, None, 0.75), id="clamp-max-only").param()
    yield Case("aten::clamp.out", aten.clamp.default, (x, 0.5, None), id="clamp-min-only").param()
    yield Case("aten::clamp.out", aten.clamp.default, (x, 1.0, -1.0), id="clamp-min-above-max").param()
    yield Case("aten::clamp.out", aten.clamp.default, (rand(3, 4, dtype=I32), 1.5, 2), id="clamp-int-float").param()
    yield Case("aten::clamp.out", aten.clamp.default, (rand(3, 4, dtype=I64), -1, 2), id="clamp-int").param()
    yield Case(
        "aten::clamp.Tensor_out", aten.clamp.Tensor, (rand(3, 4), rand(4) - 1, rand(3, 1) + 1), id="clamp-tensor"
    ).param()
    cond = rand(3, 4, dtype=B)
    yield Case("aten::where.self_out", aten.where.self, (cond, rand(3, 4), rand(4, dtype=F64)), id="where").param()
    yield Case(
        "aten::where.self_out", aten.where.self, (cond, rand(3, 4, dtype=I32), torch.tensor(2.5)), id="where-0dim"
    ).param()
    yield Case(
        "aten::where.self_out",
        aten.where.self,
        (cond[:, :1], rand(1, 4, dtype=I64), rand(3, 1, dtype=I32)),
        id="where-broadcast",
    ).param()


def _activation_cases():
    for dtype in FLOATS:
        x = rand(4, 6, dtype=dtype)
        yield Case("aten::hardtanh.out", aten.hardtanh.default, (x, -1.0, 1.0), id=f"hardtanh-{dtype}").param()
        yield Case("aten::hardtanh.out", aten.hardtanh.default, (x, 0.0, 6.0), id=f"relu6-{dtype}").param()
        for approximate in ["none", "tanh"]:
            yield Case(
                "aten::gelu.out",
                lambda a, m: aten.gelu(a, approximate=m),
                (x, approximate),
                id=f"gelu-{approximate}-{dtype}",
            ).param()
        for dim in [-1, 0]:
            yield Case(
                "aten::_softmax.out", aten._softmax.default, (x, dim, False), id=f"softmax-{dim}-{dtype}"
            ).param()
            yield Case(
                "aten::_log_softmax.out", aten._log_softmax.default, (x, dim, False), id=f"log_softmax-{dim}-{dtype}"
            ).param()
    masked = torch.tensor([[0.0, -math.inf, 1.0], [-math.inf, -math.inf, -math.inf]])
    yield Case("aten::_softmax.out", aten._softmax.default, (masked, 1, False), id="softmax-inf").param()
    yield Case("aten::_softmax.out", aten._softmax.default, (rand(2, 3, 5) * 30, 1, False), id="softmax-3d").param()
    yield Case("aten::_log_softmax.out", aten._log_softmax.default, (masked, -1, False), id="log_softmax-inf").param()
    yield Case("aten::_softmax.out", aten._softmax.default, (torch.tensor(2.0), 0, False), id="softmax-0dim").param()
    yield Case(
        "aten::gelu.out", lambda a, m: aten.gelu(a, approximate=m), (rand(3, dtype=I32), "none"), id="gelu-int-refused"
    ).param()


CASES = [
    *_unary_cases(),
    *_binary_cases(),
    *_division_cases(),
    *_power_cases(),
    *_comparison_cases(),
    *_selection_cases(),
    *_activation_cases(),
]


@pytest.mark.parametrize("case", CASES)
def test_elementwise(case):
    run_case(case)
