"""The core ATen elementwise ops over every dtype PyTorch supports, against PyTorch eager.

Cases come from tables: (op, reference, inputs) crossed with the ten dtypes models use.
Where PyTorch refuses a dtype, the kernel must raise `KernelError` too. bfloat16 tensors
run through the harness like every other dtype (compared in float32 with the bfloat16 tolerance of ``TOLERANCES``).
"""

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import (
    ALL,
    BF16,
    F16,
    F32,
    F64,
    FLOATS,
    I8,
    I16,
    I32,
    I64,
    INTS,
    U8,
    B,
    Case,
    assert_close,
    positive,
    rand,
    run_case,
)
from torchedge.kernels.registry import get_kernel

aten = torch.ops.aten
INF, NAN = math.inf, math.nan


def same_zeros(got, want):
    """Values close, and zeros carry the same sign (round(-0.4) is -0.0, sign(-0.0) is 0.0)."""
    for g, w in zip(got, want):
        assert_close(g, w)  # bfloat16 in float32 with its TOLERANCES entry
        zeros = w.astype(np.float32) == 0
        np.testing.assert_array_equal(
            np.signbit(g.astype(np.float32)[zeros]), np.signbit(w.astype(np.float32)[zeros]), err_msg="sign of zero"
        )


# -- inputs -----------------------------------------------------------------------------


def unit(*shape, dtype=F32):
    return rand(*shape, dtype=dtype, low=-1.0, high=1.0)


def above_one(*shape, dtype=F32):
    return rand(*shape, dtype=dtype, low=1.0, high=5.0)


def probability(*shape, dtype=F32):
    return rand(*shape, dtype=dtype, low=-0.2, high=1.2)


SPECIALS = [NAN, INF, -INF, 0.0, -0.0, 0.4, -0.4, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 1e-3, 7.0, -30.0, 100.0]


def specials(dtype):
    return torch.tensor(SPECIALS, dtype=dtype)


def extremes(dtype):
    info = torch.iinfo(dtype)
    return torch.tensor([info.min, info.min + 1, -1 if info.min else 2, 0, 1, info.max - 1, info.max], dtype=dtype)


def divisors(*shape, dtype=F32):
    """Nonzero in every dtype, of both signs: [-3, -1, 2, 3.5] (uint8 wraps the negatives)."""
    return torch.tensor([-3.0, -1.0, 2.0, 3.5]).reshape(*shape).to(dtype)


# -- unary --------------------------------------------------------------------------------


def _default(name):
    return getattr(aten, name).default


UNARY = [  # name, reference, input maker (values where the op is interesting), arguments after self
    *[
        (name, _default(name), rand, ())
        for name in [
            "neg",
            "abs",
            "sign",
            "ceil",
            "floor",
            "round",
            "trunc",
            "bitwise_not",
            "reciprocal",
            "exp",
            "exp2",
            "expm1",
            "sin",
            "cos",
            "tan",
            "atan",
            "sinh",
            "cosh",
            "tanh",
            "asinh",
            "sigmoid",
            "erf",
            "relu",
            "logical_not",
            "isnan",
            "isinf",
            "hardsigmoid",
            "hardswish",
            "silu",
        ]
    ],
    *[(name, _default(name), positive, ()) for name in ["sqrt", "rsqrt", "log", "log2", "log10", "log1p"]],
    *[(name, _default(name), unit, ()) for name in ["asin", "acos", "atanh", "erfinv"]],
    ("acosh", aten.acosh.default, above_one, ()),
    ("logit", aten.logit.default, probability, (None,)),
    ("elu", aten.elu.default, rand, (1.0, 1.0, 1.0)),
    ("leaky_relu", aten.leaky_relu.default, rand, (0.01,)),
    ("gelu", lambda x, m: aten.gelu.default(x, approximate=m), rand, ("none",)),
]
SIGNED_ZERO = {"neg", "abs", "sign", "ceil", "floor", "round", "trunc", "relu", "leaky_relu", "elu", "silu"}
# gelu(+-inf): PyTorch's vectorized float32 loop gives nan, its scalar loop (and float64) the limits
# inf and 0, which the kernel gives for every dtype.
INFINITY_DIFFERS = {"gelu"}
WRAPPING = ["neg", "abs", "sign", "bitwise_not", "ceil", "round", "reciprocal", "sqrt", "exp2"]


def _unary_cases():
    for name, ref, make, extra in UNARY:
        op = f"aten::{name}.out"
        for dtype in ALL:
            yield Case(op, ref, (make(4, 5, dtype=dtype), *extra), id=f"{name}-{dtype}")
        compare = same_zeros if name in SIGNED_ZERO else None
        for dtype in [F16, BF16, F32]:
            x = specials(dtype)
            if name in INFINITY_DIFFERS:
                x = x[~x.isinf()]
            yield Case(op, ref, (x, *extra), compare=compare, id=f"{name}-special-{dtype}")
        yield Case(op, ref, (torch.tensor(0.3), *extra), id=f"{name}-0dim")
        yield Case(op, ref, (rand(0, 3), *extra), id=f"{name}-empty")
    for name in WRAPPING:
        for dtype in INTS:
            yield Case(f"aten::{name}.out", _default(name), (extremes(dtype),), id=f"{name}-extremes-{dtype}")


def _unary_with_arguments_cases():
    table = [  # op, reference, extra arguments
        ("aten::elu.out", aten.elu.default, (0.5, 2.0, 1.5)),
        ("aten::leaky_relu.out", aten.leaky_relu.default, (0.2,)),
        ("aten::logit.out", aten.logit.default, (0.1,)),
        ("aten::logit.out", aten.logit.default, (-1.0,)),
        ("aten::gelu.out", lambda x, m: aten.gelu.default(x, approximate=m), ("tanh",)),
        ("aten::round.decimals_out", lambda x, d: aten.round.decimals(x, decimals=d), (2,)),
        ("aten::round.decimals_out", lambda x, d: aten.round.decimals(x, decimals=d), (-1,)),
        ("aten::round.decimals_out", lambda x, d: aten.round.decimals(x, decimals=d), (0,)),
        ("aten::hardtanh.out", aten.hardtanh.default, (-1.0, 1.0)),
        ("aten::hardtanh.out", aten.hardtanh.default, (0.0, 6.0)),
        ("aten::hardtanh.out", aten.hardtanh.default, (-0.5, 2.5)),
    ]
    for op, ref, extra in table:
        name = f"{op.split('::')[1]}{extra}"
        for dtype in ALL:
            yield Case(op, ref, (rand(3, 4, dtype=dtype, low=-9, high=9), *extra), id=f"{name}-{dtype}")
        yield Case(op, ref, (specials(F32), *extra), id=f"{name}-special")
    values = torch.tensor([1.2345, 2.5, 3.5, -2.5, 1250.0, -0.04, 0.125, 12345.678])
    for dtype in FLOATS:
        for decimals in [-2, 1, 2, 3]:
            yield Case(
                "aten::round.decimals_out",
                lambda x, d: aten.round.decimals(x, decimals=d),
                (values.to(dtype), decimals),
                compare=same_zeros,
                id=f"round-decimals-{decimals}-{dtype}",
            )


# -- binary -------------------------------------------------------------------------------


def _alpha(fn):
    return lambda a, b, alpha: fn(a, b, alpha=alpha)


def _mode(a, b, mode):
    return aten.div.Tensor_mode(a, b, rounding_mode=mode)


BINARY = [  # tensor op, scalar op (or None), reference
    ("add.out", "add.Scalar_out", _alpha(aten.add)),
    ("sub.out", "sub.Scalar_out", _alpha(aten.sub)),
    ("mul.out", "mul.Scalar_out", aten.mul),
    ("div.out", "div.Scalar_out", aten.div),
    ("floor_divide.out", "floor_divide.Scalar_out", aten.floor_divide),
    ("fmod.Tensor_out", "fmod.Scalar_out", aten.fmod),
    ("remainder.Tensor_out", "remainder.Scalar_out", aten.remainder),
    ("atan2.out", None, aten.atan2),
    ("pow.Tensor_Tensor_out", "pow.Tensor_Scalar_out", aten.pow),
    ("minimum.out", None, aten.minimum),
    ("maximum.out", None, aten.maximum),
    ("bitwise_and.Tensor_out", "bitwise_and.Scalar_out", aten.bitwise_and),
    ("bitwise_or.Tensor_out", "bitwise_or.Scalar_out", aten.bitwise_or),
    ("bitwise_xor.Tensor_out", "bitwise_xor.Scalar_out", aten.bitwise_xor),
    ("logical_and.out", None, aten.logical_and),
    ("logical_or.out", None, aten.logical_or),
    ("logical_xor.out", None, aten.logical_xor),
    *[
        (f"{name}.Tensor_out", f"{name}.Scalar_out", getattr(aten, name))
        for name in ["eq", "ne", "lt", "le", "gt", "ge"]
    ],
]
ALPHA = {"add.out", "sub.out"}
MIXED = [  # (self, other) dtype pairs: promotion across kinds and widths
    (U8, I8),
    (B, I32),
    (I32, F16),
    (BF16, F16),
    (BF16, I64),
    (B, BF16),
    (F16, F64),
]
ZERO_DIM = [(I32, F32), (F16, F64), (U8, I64), (BF16, F32), (B, I16)]  # tensor dtype, 0-dim dtype
SCALARS = [3, -2.5, True]


def _binary_cases():
    for tensor_op, scalar_op, ref in BINARY:
        name = tensor_op.split(".")[0]
        op = f"aten::{tensor_op}"
        extra = (2,) if tensor_op in ALPHA else ()
        for dtype in ALL:
            yield Case(op, ref, (rand(3, 4, dtype=dtype), divisors(1, 4, dtype=dtype), *extra), id=f"{name}-{dtype}")
        for a, b in MIXED:
            yield Case(op, ref, (rand(2, 4, dtype=a), divisors(4, 1, 1, dtype=b), *extra), id=f"{name}-{a}-{b}")
        for a, b in ZERO_DIM:
            yield Case(op, ref, (rand(2, 3, dtype=a), torch.tensor(2.0).to(b), *extra), id=f"{name}-0dim-{a}-{b}")
        yield Case(op, ref, (rand(0, 3), rand(3), *extra), id=f"{name}-empty")
        yield Case(op, ref, (torch.tensor(1.5), torch.tensor(-2.0), *extra), id=f"{name}-0dim-both")
        x = specials(F32)
        yield Case(op, ref, (x, x.roll(1).reshape(3, 1, 6)[..., :1], *extra), id=f"{name}-special")
        if scalar_op is None:
            continue
        for dtype in [B, I32, F16, BF16]:
            for scalar in SCALARS:
                yield Case(
                    f"aten::{scalar_op}",
                    ref,
                    (rand(3, 4, dtype=dtype), scalar, *extra),
                    id=f"{scalar_op}-{dtype}-{scalar!r}",
                )


def _division_cases():
    a = torch.tensor([5.0, -5.0, -4.0, 4.0, 7.5, -7.5, INF, NAN, 0.0, -0.0, 5.0, -5.0, 1.0, -1.0])
    b = torch.tensor([3.0, 3.0, 2.0, -2.0, -2.0, 2.0, 2.0, 1.0, 3.0, -3.0, INF, INF, 0.0, 0.0])
    ints = torch.tensor([7, -7, 7, -7, 0, 9, -128, 127])
    int_divisors = torch.tensor([2, 2, -2, -2, 3, -4, -1, 5])
    table = [  # name, op, reference, arguments after the operands
        ("fmod", "aten::fmod.Tensor_out", aten.fmod, ()),
        ("remainder", "aten::remainder.Tensor_out", aten.remainder, ()),
        ("floor_divide", "aten::floor_divide.out", aten.floor_divide, ()),
        ("div-trunc", "aten::div.out_mode", _mode, ("trunc",)),
        ("div-floor", "aten::div.out_mode", _mode, ("floor",)),
    ]
    for name, op, ref, extra in table:
        for dtype in FLOATS:
            yield Case(op, ref, (a.to(dtype), b.to(dtype), *extra), compare=same_zeros, id=f"{name}-signs-{dtype}")
        for dtype in INTS:
            yield Case(op, ref, (ints.to(dtype), int_divisors.to(dtype), *extra), id=f"{name}-ints-{dtype}")
            yield Case(op, ref, (ints.to(dtype), torch.zeros(1, dtype=dtype), *extra), id=f"{name}-by-zero-{dtype}")
    yield Case("aten::fmod.Scalar_out", aten.fmod, (ints, 0), id="fmod-scalar-zero")
    yield Case("aten::fmod.Scalar_out", aten.fmod, (ints, 0.0), id="fmod-scalar-float-zero")
    yield Case("aten::remainder.Scalar_out", aten.remainder, (ints, -3), id="remainder-scalar")
    yield Case(
        "aten::remainder.Scalar_Tensor_out",
        aten.remainder.Scalar_Tensor,
        (7, int_divisors),
        id="remainder-scalar-tensor",
    )
    yield Case(
        "aten::remainder.Scalar_Tensor_out", aten.remainder.Scalar_Tensor, (-7.5, a), id="remainder-float-tensor"
    )


def _scalar_only_cases():
    """rsub and div with a rounding mode exist only as ``.Scalar`` overloads with a scalar other."""
    for dtype in ALL:
        x = rand(3, 4, dtype=dtype)
        for scalar in SCALARS:
            yield Case("aten::rsub.Scalar_out", _alpha(aten.rsub), (x, scalar, 3), id=f"rsub-{dtype}-{scalar!r}")
            for mode in ["trunc", "floor"]:
                yield Case(
                    "aten::div.Scalar_mode_out",
                    lambda a, b, m: aten.div.Scalar_mode(a, b, rounding_mode=m),
                    (x, scalar, mode),
                    id=f"div-{mode}-{dtype}-{scalar!r}",
                )


def _power_cases():
    exponents = torch.tensor([[-2, -1, 0, 1], [2, 3, 5, 7]])
    for dtype in ALL:
        base = rand(2, 4, dtype=dtype)
        yield Case(
            "aten::pow.Tensor_Tensor_out",
            aten.pow.Tensor_Tensor,
            (base, exponents.to(dtype)),
            id=f"pow-int-exponents-{dtype}",
        )
        for exponent in [2, 3, 0.5, -1, -0.5, 2.5, True]:
            yield Case(
                "aten::pow.Tensor_Scalar_out", aten.pow.Tensor_Scalar, (base, exponent), id=f"pow-{dtype}-{exponent!r}"
            )
        yield Case(
            "aten::pow.Scalar_out", aten.pow.Scalar, (2, exponents.abs().to(dtype)), id=f"pow-scalar-int-{dtype}"
        )
        yield Case("aten::pow.Scalar_out", aten.pow.Scalar, (1.5, rand(2, 3, dtype=dtype)), id=f"pow-scalar-{dtype}")
    yield Case(
        "aten::pow.Tensor_Tensor_out", aten.pow.Tensor_Tensor, (specials(F32), specials(F32).flip(0)), id="pow-special"
    )


def _selection_cases():
    for dtype in ALL:
        x = rand(3, 4, dtype=dtype)
        low, high = rand(4, dtype=dtype, low=-2, high=0), rand(3, 1, dtype=dtype, low=0, high=2)
        yield Case("aten::clamp.Tensor_out", aten.clamp.Tensor, (x, low, high), id=f"clamp-tensors-{dtype}")
        yield Case("aten::clamp.Tensor_out", aten.clamp.Tensor, (x, None, high), id=f"clamp-max-tensor-{dtype}")
        yield Case("aten::clamp.out", aten.clamp.default, (x, -1, 2), id=f"clamp-ints-{dtype}")
        yield Case("aten::clamp.out", aten.clamp.default, (x, -1.5, None), id=f"clamp-float-{dtype}")
        yield Case(
            "aten::where.self_out", aten.where.self, (rand(3, 1, dtype=B), x, rand(4, dtype=dtype)), id=f"where-{dtype}"
        )
    nan = torch.tensor([1.0, NAN, 3.0])
    yield Case(
        "aten::clamp.Tensor_out",
        aten.clamp.Tensor,
        (torch.tensor([1.0, 2.0, NAN]), nan, nan.flip(0)),
        id="clamp-nan-bounds",
    )
    yield Case(
        "aten::clamp.Tensor_out", aten.clamp.Tensor, (rand(3, 4, dtype=I32), rand(4), None), id="clamp-promoting-bound"
    )
    yield Case("aten::clamp.out", aten.clamp.default, (rand(3, 4, dtype=F16), 0.5, -0.5), id="clamp-min-above-max")


def _softmax_cases():
    for dtype in [BF16, F16]:
        x = rand(3, 5, dtype=dtype)
        yield Case("aten::_softmax.out", aten._softmax.default, (x, -1, False), id=f"softmax-{dtype}")
        yield Case("aten::_log_softmax.out", aten._log_softmax.default, (x, 0, False), id=f"log_softmax-{dtype}")


CASES = [
    *_unary_cases(),
    *_unary_with_arguments_cases(),
    *_binary_cases(),
    *_scalar_only_cases(),
    *_division_cases(),
    *_power_cases(),
    *_selection_cases(),
    *_softmax_cases(),
]


@pytest.mark.parametrize("case", [c.param() for c in CASES])
def test_elementwise_core(case):
    run_case(case)


def test_in_place_out_aliasing_an_input():
    """A kernel whose out is its own input (in-place) still reads every input before writing."""
    x = np.linspace(-4, 4, 12, dtype=np.float32).reshape(3, 4)
    for op, ref in [
        ("aten::hardswish.out", aten.hardswish.default),
        ("aten::sign.out", aten.sign.default),
        ("aten::leaky_relu.out", lambda t: aten.leaky_relu.default(t, 0.1)),
    ]:
        want = ref(torch.from_numpy(x)).numpy()
        buffer = x.copy()
        args = (buffer, 0.1) if "leaky" in op else (buffer,)
        get_kernel(op).fn(*args, buffer)
        assert_close(buffer, want, what=op)
    a, b = x.copy(), np.full((3, 4), 1.5, np.float32)
    get_kernel("aten::remainder.Tensor_out").fn(a, b, a)
    assert_close(a, aten.remainder(torch.from_numpy(x), 1.5).numpy())
