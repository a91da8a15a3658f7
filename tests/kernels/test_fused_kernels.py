"""torchedge's fused kernels (``torchedge_fused::``) and the portable kernels' fast paths, against eager.

The fused kernels are compared with the chain of PyTorch operators they replace; the fast
paths (float32/float64 shortcuts, pow by repeated multiplication, the float32 GELU and erf,
the per-tap convolution) with PyTorch's own operators, including outs that alias the input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import BF16, F16, F32, F64, Case, assert_close, numpy_dtype_of, rand, run_case, to_numpy
from torchedge.kernels.portable.common import quiet_run
from torchedge.kernels.registry import get_kernel

aten = torch.ops.aten


def _kernel(name):
    return get_kernel(name).fn


# -- attention ---------------------------------------------------------------------------------


def _sdpa_decomposition(q, k, v, mask, scale):
    """What torch.export leaves of scaled_dot_product_attention (the chain the fusion replaces)."""
    s = math.sqrt(scale)
    scores = (q * s) @ (k.transpose(-2, -1) * s)
    if mask is not None:
        scores = scores + mask
    probs = torch.softmax(scores, -1)
    return torch.where(torch.isneginf(scores).all(-1, keepdim=True), torch.zeros_like(probs), probs) @ v


def _interleaved_reference(q, k, v, mask, scale):
    """The decomposition on (..., S, H, D) tensors: heads moved before the tokens and back."""
    heads_first = (t.transpose(-3, -2) for t in (q, k, v))
    return _sdpa_decomposition(*heads_first, mask, scale).transpose(-3, -2)


def _attention_cases():
    for dtype in [F32, F64]:
        q, k, v = rand(1, 4, 16, 8, dtype=dtype), rand(1, 4, 16, 8, dtype=dtype), rand(1, 4, 16, 8, dtype=dtype)
        causal = torch.triu(torch.full((16, 16), -math.inf, dtype=dtype), 1)[None, None]
        yield Case(
            "torchedge_fused::attention.out", _sdpa_decomposition, (q, k, v, None, 0.125), id=f"attention-{dtype}"
        ).param()
        yield Case(
            "torchedge_fused::attention.out",
            _sdpa_decomposition,
            (q, k, v, causal, 0.125),
            id=f"attention-causal-{dtype}",
        ).param()
    # different query and key lengths, value width, batch dims; a row masked out entirely gives zeros
    mask = rand(2, 1, 5, 7)
    mask[0, 0, 2] = -math.inf
    yield Case(
        "torchedge_fused::attention.out",
        _sdpa_decomposition,
        (rand(2, 3, 5, 4), rand(2, 3, 7, 4), rand(2, 3, 7, 6), mask, 0.5),
        id="attention-shapes",
    ).param()
    # long enough that the kernel takes the heads a chunk at a time: a mask shared by the heads,
    # one query masked out in every head. Each output sums 400 weighted values: rounding
    # differences of a few 1e-7 of the values' magnitude are expected, hence the atol.
    # The same in the interleaved layout (..., S, H, D), without a mask.
    mask = rand(1, 1, 300, 400)
    mask[..., 7, :] = -math.inf
    long = [
        ("attention", _sdpa_decomposition, [(2, 3, 300, 8), (2, 3, 400, 8), (2, 3, 400, 5)], mask),
        ("attention_interleaved", _interleaved_reference, [(1, 300, 3, 8), (1, 400, 3, 8), (1, 400, 3, 5)], None),
    ]
    for name, reference, shapes, long_mask in long:
        yield Case(
            f"torchedge_fused::{name}.out",
            reference,
            (*(rand(*shape, low=-1.0, high=1.0) for shape in shapes), long_mask, 0.3),
            atol=1e-5,
            id=f"{name.replace('_', '-')}-chunked-heads",
        ).param()
    # the interleaved layout (..., S, H, D): lengths, widths and batch dims that differ, a masked
    # out query, heads taken a chunk at a time
    mask = rand(2, 3, 5, 7)
    mask[1, 2, 4] = -math.inf
    for dtype in [F32, F64]:
        yield Case(
            "torchedge_fused::attention_interleaved.out",
            _interleaved_reference,
            (rand(2, 5, 3, 4, dtype=dtype), rand(2, 7, 3, 4, dtype=dtype), rand(2, 7, 3, 6, dtype=dtype), mask, 0.5),
            id=f"attention-interleaved-{dtype}",
        ).param()
    yield Case(
        "torchedge_fused::attention_interleaved.out",
        _interleaved_reference,
        (rand(2, 2, 6, 2, 4), rand(2, 2, 6, 2, 4), rand(2, 2, 6, 2, 4), None, 1.0),
        id="attention-interleaved-batch-dims",
    ).param()
    # where exp on the scores as they are fails, each row shifted by its maximum: scores far
    # outside exp's range; scores near 15 with values so large that the unshifted weights
    # overflow their products; rows far below 0 (unshifted weights subnormal); scores near
    # 88, each weight finite but not their row sums (small values keep the products finite);
    # a mask of -inf beside moderate scores (no shift needed)
    big = rand(2, 6, 8, low=-10.0, high=10.0)
    near = torch.full((2, 6, 8), math.sqrt(15 / 8)) + rand(2, 6, 8, low=-1e-3, high=1e-3)
    threes = 3 + torch.round(rand(2, 6, 8, low=-0.05, high=0.05) * 1024) / 1024  # scores near -96, exact
    edge = torch.full((2, 6, 8), math.sqrt(88 / 8)) + rand(2, 6, 8, low=-1e-4, high=1e-4)
    holes = rand(2, 6, 6)
    holes[:, :, 1::2] = -math.inf
    for name, args in [
        ("large-scores", (big, big.flip(1), rand(2, 6, 3), None, 1.0)),
        ("huge-values", (near, near, rand(2, 6, 3, low=1e32, high=2e32), None, 1.0)),
        ("rows-far-below-zero", (torch.full((2, 6, 8), -4.0), threes, rand(2, 6, 3), None, 1.0)),
        ("row-sums-overflow", (edge, edge, rand(2, 6, 3, low=1e-3, high=2e-3), None, 1.0)),
        ("minus-inf-mask", (rand(2, 6, 8), rand(2, 6, 8), rand(2, 6, 3), holes, 1.0)),
    ]:
        yield Case("torchedge_fused::attention.out", _sdpa_decomposition, args, id=f"attention-{name}").param()
    yield Case(
        "torchedge_fused::attention.out",
        _sdpa_decomposition,
        (rand(3, 4, 4, dtype=F16), rand(3, 4, 4, dtype=F16), rand(3, 4, 4, dtype=F16), None, 1.0),
        id="attention-float16-refused",
    ).param()  # the pass fuses float32 and float64 only


@pytest.mark.parametrize("case", list(_attention_cases()))
def test_attention(case):
    if "refused" in case.id:
        from torchedge.errors import KernelError

        args = [to_numpy(a) if isinstance(a, torch.Tensor) else a for a in case.args]
        with pytest.raises(KernelError):
            _kernel(case.op)(*args, np.empty(args[0].shape, np.float16))
        return
    run_case(case)


def test_attention_without_keys_gives_zeros():
    # every query's scores are empty, so all masked out: the safe softmax gives zeros
    q, k, v = rand(2, 3, 4), rand(2, 0, 4), rand(2, 0, 5)
    out = np.full((2, 3, 5), np.nan, np.float32)
    _kernel("torchedge_fused::attention.out")(*(to_numpy(t) for t in (q, k, v)), None, 1.0, out)
    np.testing.assert_array_equal(out, to_numpy(_sdpa_decomposition(q, k, v, None, 1.0)))


@pytest.mark.parametrize(
    "shapes",
    [
        ((2, 5, 3, 4), (2, 7, 2, 4), (2, 7, 2, 4)),
        ((2, 5, 3, 4), (2, 7, 3, 4), (2, 6, 3, 4)),
        ((5, 3, 4),) * 2 + ((5, 4),),
    ],
)
def test_interleaved_attention_refuses_shapes_that_do_not_match(shapes):
    from torchedge.errors import KernelError

    q, k, v = (np.zeros(shape, np.float32) for shape in shapes)
    with pytest.raises(KernelError, match="shapes do not match"):
        _kernel("torchedge_fused::attention_interleaved.out")(q, k, v, None, 1.0, np.empty_like(q))


def test_attention_refuses_a_mask_that_does_not_broadcast():
    from torchedge.errors import KernelError

    q = to_numpy(rand(2, 3, 4))
    with pytest.raises(KernelError, match="does not broadcast"):
        _kernel("torchedge_fused::attention.out")(q, q, q, np.zeros((3, 2), np.float32), 1.0, np.empty_like(q))


# -- convolution + batch norm + activation -------------------------------------------------------------


def _conv_bn_act_reference(
    x, w, b, stride, padding, padding_after, dilation, groups, gamma, beta, mean, var, eps, activation, low, high
):
    pads = [p for before, after in zip(reversed(padding), reversed(padding_after)) for p in (before, after)]
    y = aten.convolution(
        aten.constant_pad_nd(x, pads, 0.0), w, b, stride, [0] * len(stride), dilation, False, [0] * len(stride), groups
    )
    if mean is not None:
        y = aten._native_batch_norm_legit_no_training(y, gamma, beta, mean, var, 0.1, eps)[0]
    if activation == "relu":
        y = torch.relu(y)
    elif activation == "hardtanh":
        y = torch.nn.functional.hardtanh(y, low, high)
    return y


# Folding the batch norm into the weights rounds differently from normalising the convolution's
# output: the error scales with the terms the convolution adds up (outputs here reach ~40).
_CONV_ATOL = 2e-4


def _conv_bn_act_cases():
    configs = [  # input, weight, stride, padding before, padding after, dilation, groups
        ((2, 8, 9, 10), (16, 8, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], 1),
        ((1, 8, 10, 10), (8, 8, 3, 3), [2, 2], [0, 0], [1, 1], [1, 1], 1),  # TF "same" padding: more after
        ((1, 6, 11, 9), (6, 1, 3, 3), [2, 1], [1, 0], [1, 2], [1, 1], 6),  # depthwise
        ((1, 256, 13, 14), (256, 1, 3, 3), [2, 2], [0, 0], [1, 1], [2, 1], 256),  # channels-last, dilated
        ((1, 32, 12, 12), (24, 32, 3, 3), [1, 1], [1, 1], [1, 1], [1, 1], 1),  # per-tap GEMMs
        ((1, 48, 13, 12), (48, 48, 3, 3), [1, 1], [0, 0], [1, 2], [1, 1], 1),  # Winograd, TF padding
        ((2, 4, 7, 7), (6, 4, 1, 1), [1, 1], [0, 0], [0, 0], [1, 1], 1),  # pointwise
        ((1, 4, 12), (5, 4, 3), [1], [2], [0], [2], 1),  # 1-D
    ]
    for n, (xs, ws, stride, before, after, dilation, groups) in enumerate(configs):
        out_channels = ws[0]
        for dtype in [F32, F64]:
            bn = (
                rand(out_channels, dtype=dtype),
                rand(out_channels, dtype=dtype),
                rand(out_channels, dtype=dtype),
                rand(out_channels, dtype=dtype, low=0.5, high=2.0),
            )
            for activation, low, high in [("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("hardtanh", 0.0, 6.0)]:
                yield Case(
                    "torchedge_fused::conv_bn_act.out",
                    _conv_bn_act_reference,
                    (
                        rand(*xs, dtype=dtype),
                        rand(*ws, dtype=dtype),
                        rand(out_channels, dtype=dtype),
                        stride,
                        before,
                        after,
                        dilation,
                        groups,
                        *bn,
                        1e-3,
                        activation,
                        low,
                        high,
                    ),
                    rtol=1e-4,
                    atol=_CONV_ATOL,
                    id=f"conv_bn_act-{n}-{activation}-{dtype}",
                ).param()
        # without a batch norm or a conv bias
        yield Case(
            "torchedge_fused::conv_bn_act.out",
            _conv_bn_act_reference,
            (
                rand(*xs),
                rand(*ws),
                None,
                stride,
                before,
                after,
                dilation,
                groups,
                None,
                None,
                None,
                None,
                1e-5,
                "relu",
                0.0,
                0.0,
            ),
            rtol=1e-4,
            atol=_CONV_ATOL,
            id=f"conv_act-{n}",
        ).param()
        yield Case(
            "torchedge_fused::conv_bn_act.out",
            _conv_bn_act_reference,
            (
                rand(*xs),
                rand(*ws),
                None,
                stride,
                before,
                after,
                dilation,
                groups,
                None,
                None,
                rand(out_channels),
                rand(out_channels, low=0.5, high=2.0),
                1e-5,
                "none",
                0.0,
                0.0,
            ),
            rtol=1e-4,
            atol=_CONV_ATOL,
            id=f"conv_bn-no-affine-{n}",
        ).param()


@pytest.mark.parametrize("case", list(_conv_bn_act_cases()))
def test_conv_bn_act(case):
    run_case(case)


def test_conv_bn_act_folds_constant_weights_once():
    """Read-only (constant) weights are folded once and reused; writable ones every call."""
    from torchedge.kernels.optimized import fused
    from torchedge.kernels.optimized.derived_arrays import cached_keys

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    stats = [rng.standard_normal(5).astype(np.float32) for _ in range(3)] + [np.full(5, 2.0, np.float32)]
    kernel = _kernel("torchedge_fused::conv_bn_act.out")

    def args(weight, mean):
        return (x, weight, None, [1, 1], [1, 1], [1, 1], [1, 1], 1, *stats[:2], mean, stats[3], 1e-5, "none", 0.0, 0.0)

    for a in (w, *stats):
        a.flags.writeable = False
    out1, out2 = np.empty((1, 5, 6, 6), np.float32), np.empty((1, 5, 6, 6), np.float32)
    kernel(*args(w, stats[2]), out1)
    assert any(key[0] == id(w) for key in cached_keys(fused._fold_batch_norm))
    kernel(*args(w, stats[2]), out2)
    np.testing.assert_array_equal(out1, out2)
    # a different (writable) mean is never served from the cache
    mean = stats[2] + 1
    kernel(*args(w, mean), out2)
    want = torch.ops.aten._native_batch_norm_legit_no_training(
        aten.convolution(
            torch.from_numpy(x), torch.from_numpy(w.copy()), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1
        ),
        *(torch.from_numpy(s.copy()) for s in stats[:2]),
        torch.from_numpy(mean),
        torch.from_numpy(stats[3].copy()),
        0.1,
        1e-5,
    )[0]
    assert_close(out2, want.numpy(), rtol=1e-4, atol=_CONV_ATOL)


# -- linear + activation ---------------------------------------------------------------------------


def _linear_act_reference(x, w, b, activation):
    y = x @ w if b is None else torch.addmm(b, x, w)
    return {"none": y, "relu": torch.relu(y), "gelu": torch.nn.functional.gelu(y), "silu": torch.nn.functional.silu(y)}[
        activation
    ]


@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_act(activation, dtype, bias):
    run_case(
        Case(
            "torchedge_fused::linear_act.out",
            _linear_act_reference,
            (
                rand(9, 12, dtype=dtype),
                rand(12, 7, dtype=dtype) / 3,
                rand(7, dtype=dtype) if bias else None,
                activation,
            ),
            rtol=1e-5,
            atol=1e-5,
        )
    )


# -- fast paths of the portable kernels ---------------------------------------------------------------


@pytest.mark.parametrize("exponent", [2, 3, -2, 0.5, -0.5, -1, 4, 5, 6, 7, 8, 2.0, 3.0, 9, 1.5])
@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
def test_pow_scalar_exponents(exponent, dtype):
    """Small exponents take products, sqrt and reciprocals: as ATen (bfloat16's 3 and -2 round x * x first,
    float16's 0.5 and -0.5 are pow's), special values included."""
    x = rand(64, dtype=dtype)
    x[:6] = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-3])
    want = torch.pow(x, exponent)
    out = np.empty(tuple(want.shape), numpy_dtype_of(want.dtype))
    with quiet_run():
        _kernel("aten::pow.Tensor_Scalar_out")(to_numpy(x), exponent, out)
    assert_close(out, to_numpy(want), rtol=3e-6 if dtype in (F32, F64) else None)
    finite = np.isfinite(to_numpy(want).astype(np.float32))
    np.testing.assert_array_equal(
        np.signbit(out.astype(np.float32))[finite], np.signbit(to_numpy(want).astype(np.float32))[finite]
    )


@pytest.mark.parametrize("exponent", [2, 3, 5, -2, 0.5])
def test_pow_scalar_out_aliasing_self(exponent):
    x = rand(4, 33)
    array = to_numpy(x)
    with quiet_run():
        _kernel("aten::pow.Tensor_Scalar_out")(array, exponent, array)
    assert_close(array, to_numpy(torch.pow(x, exponent)))


def test_gelu_and_erf_float32_over_the_whole_range():
    x = torch.linspace(-8, 8, 200001)
    x[:5] = torch.tensor([0.0, -0.0, math.nan, 3e38, -3e38])
    out = np.empty(x.shape, np.float32)
    with quiet_run():
        _kernel("aten::gelu.out")(x.numpy(), "none", out)
    want = torch.nn.functional.gelu(x.double())
    assert_close(out, want.float().numpy())
    assert out[3] == np.float32(3e38)  # x * (1/2 + ...) never overflows
    erf = np.empty(x.shape, np.float32)
    with quiet_run():
        _kernel("aten::erf.out")(x.numpy(), erf)
    assert_close(erf, torch.erf(x.double()).float().numpy())
    assert np.nanmax(np.abs(erf)) <= 1


def test_gelu_out_aliasing_self():
    x = rand(3, 5000)
    array = to_numpy(x)
    with quiet_run():
        _kernel("aten::gelu.out")(array, "none", array)
    # against float64: eager's float32 gelu is off by up to 2e-4 relative near -3 (cancellation in 1 + erf)
    assert_close(array, torch.nn.functional.gelu(x.double()).float().numpy())


@pytest.mark.parametrize(
    "op, bounds",
    [
        ("aten::clamp.out", (0.0, 6.0)),
        ("aten::clamp.out", (None, 0.0)),
        ("aten::clamp.out", (-1, 2)),
        ("aten::hardtanh.out", (0.0, 6.0)),
        ("aten::relu.out", ()),
    ],
)
@pytest.mark.parametrize("aliased", [False, True])
def test_clamp_fast_path_keeps_signed_zeros(op, bounds, aliased):
    """One-pass clamps of float32 by numbers; inputs with zeros keep their signs, also in place."""
    x = rand(7, 9)
    x[0, :4] = torch.tensor([-0.0, 0.0, math.nan, -math.inf])
    want = {
        "aten::relu.out": lambda: torch.relu(x),
        "aten::hardtanh.out": lambda: torch.nn.functional.hardtanh(x, *bounds),
        "aten::clamp.out": lambda: torch.clamp(x, *bounds),
    }[op]()
    array = to_numpy(x)
    out = array if aliased else np.empty_like(array)
    with quiet_run():
        _kernel(op)(array, *bounds, out)
    assert_close(out, want.numpy())
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want.numpy()))


@pytest.mark.parametrize("shape", [(2, 7, 33), (5, 1), (1, 197, 384)])
def test_layer_norm_into_out_and_softmax(shape):
    x, w, b = rand(*shape), rand(shape[-1]), rand(shape[-1])
    run_case(
        Case(
            "aten::native_layer_norm.out",
            aten.native_layer_norm.default,
            (x, [shape[-1]], w, b, 1e-5),
            rtol=1e-5,
            atol=1e-5,
        )
    )
    run_case(Case("aten::_softmax.out", aten._softmax.default, (x * 10, -1, False)))


@pytest.mark.parametrize(
    "op, ref",
    [
        ("aten::add.out", lambda a, b: a + b),
        ("aten::mul.out", lambda a, b: a * b),
        ("aten::sub.out", lambda a, b: a - b),
        ("aten::div.out", lambda a, b: a / b),
    ],
)
@pytest.mark.parametrize("dtype", [F32, F64])
def test_binary_fast_path_with_aliasing_and_broadcasting(op, ref, dtype):
    a, b = rand(4, 1, 6, dtype=dtype), rand(3, 6, dtype=dtype, low=0.5, high=2.0)
    args = (to_numpy(a), to_numpy(b)) + ((1,) if op in ("aten::add.out", "aten::sub.out") else ())
    out = np.empty((4, 3, 6), args[0].dtype)
    with quiet_run():
        _kernel(op)(*args, out)
    assert_close(out, to_numpy(ref(a, b)))
    same = to_numpy(rand(5, 6, dtype=dtype))  # out is self
    want = ref(torch.from_numpy(same.copy()), torch.from_numpy(same.copy()))
    with quiet_run():
        _kernel(op)(same, same.copy(), *args[2:], same)
    assert_close(same, to_numpy(want))


@pytest.mark.parametrize("rows", ["none", "all", "some"])
def test_where_with_a_row_mask(rows):
    """The safe-softmax ``where(row_mask, zeros, probs)``: a uniform small condition is one copy."""
    condition = torch.zeros(1, 4, 16, 1, dtype=torch.bool)
    if rows == "all":
        condition[:] = True
    elif rows == "some":
        condition[0, 1, 3] = True
    run_case(
        Case(
            "aten::where.self_out",
            aten.where.self,
            (condition, torch.zeros(1, 4, 16, 16), rand(1, 4, 16, 16)),
            id=f"where-{rows}",
        )
    )
