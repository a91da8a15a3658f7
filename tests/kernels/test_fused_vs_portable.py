"""Each fused operator of the optimized library against the chain of portable kernels it
replaces, without torch (`test_optimized_vs_portable` checks that every fused operator is here).

Kernels that claim the bits of their chain (``attention_exact``, the recurrent cells) compare
exactly; the others within a reassociation bound (`oracle.assert_reassociated`), computed from
the chain on absolute values.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.kernels.oracle import assert_reassociated, random_array, run_portable
from torchedge.kernels.optimized.inverted_residual import DepthwiseGeometry, inverted_residual
from torchedge.kernels.registry import get_kernel

FLOATS = [np.float32, np.float64]
CONV = "aten::convolution.out"


def _fused(name: str):
    return get_kernel(f"torchedge_fused::{name}.out", library="optimized").fn


def _conv(x, w, b, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    return run_portable(CONV, x, w, b, list(stride), list(padding), list(dilation), False, [0, 0], groups)


def _activated(name: str, x, low=0.0, high=0.0):
    if name == "none":
        return x
    if name == "hardtanh":
        return run_portable("aten::hardtanh.out", x, low, high)
    return run_portable("aten::gelu.out", x, "none") if name == "gelu" else run_portable(f"aten::{name}.out", x)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
def test_linear_act(activation, bias, dtype):
    rng = np.random.default_rng(1)
    x, w, b = random_array(rng, (5, 12), dtype), random_array(rng, (12, 7), dtype), random_array(rng, (7,), dtype)
    got = np.empty((5, 7), dtype)
    _fused("linear_act")(x, w, b if bias else None, activation, got)
    product = run_portable("aten::addmm.out", b, x, w, 1, 1) if bias else run_portable("aten::mm.out", x, w)
    bound = np.abs(x) @ np.abs(w) + (np.abs(b) if bias else 0)
    assert_reassociated(got, _activated(activation, product), bound, 12)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("activation", ["none", "relu", "hardtanh"])
@pytest.mark.parametrize("batch_norm", [True, False], ids=["bn", "no-bn"])
def test_conv_bn_act(batch_norm, activation, dtype):
    rng = np.random.default_rng(2)
    x, w, b = (
        random_array(rng, (2, 4, 7, 6), dtype),
        random_array(rng, (6, 2, 3, 3), dtype),
        random_array(rng, 6, dtype),
    )
    gamma, beta, mean = (random_array(rng, 6, dtype) for _ in range(3))
    var = np.abs(random_array(rng, 6, dtype)) + dtype(0.5)
    stats = (gamma, beta, mean, var) if batch_norm else (None, None, None, None)
    low, high = -0.5, 0.75
    got = np.empty((2, 6, 7, 6), dtype)
    # zeros: 1 before and 1 after the rows, 2 before and 0 after the columns
    _fused("conv_bn_act")(x, w, b, [1, 1], [1, 2], [1, 0], [1, 1], 2, *stats, 1e-5, activation, low, high, got)
    padded = run_portable("aten::constant_pad_nd.out", x, [2, 0, 1, 1], 0.0)
    want = _conv(padded, w, b, groups=2)
    bound = _conv(np.abs(padded), np.abs(w), np.abs(b), groups=2)
    if batch_norm:
        want = run_portable("aten::_native_batch_norm_legit_no_training.out", want, *stats, 0.1, 1e-5, outs=3)[0]
        scale = np.abs(gamma) / np.sqrt(var + dtype(1e-5))
        bound = (bound + np.abs(mean)[:, None, None]) * scale[:, None, None] + np.abs(beta)[:, None, None]
    assert_reassociated(got, _activated(activation, want, low, high), bound, 18)


def _attention_inputs(rng, dtype, sq=5, sk=7):
    q, k, v = (random_array(rng, (2, 3, s, d), dtype) for s, d in ((sq, 8), (sk, 8), (sk, 6)))
    mask = random_array(rng, (2, 1, sq, sk), dtype)
    mask[0, 0, 1, ::2] = -np.inf  # some keys masked out
    mask[1, 0, 2] = -np.inf  # a row masked out entirely: zeros
    return q, k, v, mask


def _attention_chain(q, k, v, mask, q_scale, k_scale):
    """The decomposition of ``scaled_dot_product_attention`` as portable kernels: scaled q and
    kᵀ, bmm, + mask, softmax, zeros for rows masked out entirely, bmm."""
    heads = (-1,)
    qs = run_portable("aten::mul.Scalar_out", q.reshape(heads + q.shape[-2:]), q_scale)
    ks = run_portable(
        "aten::mul.Scalar_out", np.ascontiguousarray(k.reshape(heads + k.shape[-2:]).transpose(0, 2, 1)), k_scale
    )
    scores = run_portable("aten::bmm.out", qs, ks)
    masks = np.ascontiguousarray(np.broadcast_to(mask, q.shape[:-1] + k.shape[-2:-1]).reshape(scores.shape))
    scores = run_portable("aten::add.out", scores, masks, 1)
    weights = run_portable("aten::_softmax.out", scores, -1, False)
    empty = np.all(scores == -np.inf, axis=-1, keepdims=True)
    weights = run_portable("aten::where.self_out", empty, np.zeros((), q.dtype), weights, dtype=q.dtype)
    values = v.reshape(heads + v.shape[-2:])
    return run_portable("aten::bmm.out", weights, values).reshape(q.shape[:-1] + v.shape[-1:]), weights, values


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_attention_exact_gives_the_bits_of_its_chain(dtype):
    q, k, v, mask = _attention_inputs(np.random.default_rng(3), dtype)
    got = np.empty(q.shape[:-1] + v.shape[-1:], dtype)
    _fused("attention_exact")(q, k, v, mask, 0.5, 0.75, got)
    np.testing.assert_array_equal(got, _attention_chain(q, k, v, mask, 0.5, 0.75)[0])


def _assert_attention_close(got, q, k, v, mask, scale):
    """Within what reassociating the scores (d terms) and the weighted sums (sk terms) allows:
    a score off by e changes its weight by a factor exp(e)."""
    want, weights, values = _attention_chain(q, k, v, mask, scale, 1.0)
    eps = float(np.finfo(q.dtype).eps)
    score_error = q.shape[-1] * eps * np.max(np.abs(q)) * np.max(np.abs(k)) * scale * q.shape[-1]
    bound = (weights @ np.abs(values)).reshape(want.shape)
    assert np.all(np.abs(got - want) <= 4 * (score_error + (k.shape[-2] + 8) * eps) * bound + 1e-300)
    assert not np.any(got[1, :, 2]), "a row masked out entirely gives zeros"


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("chunk", [None, 1], ids=["chunks", "one-head-a-chunk"])
def test_attention(chunk, dtype):
    from torchedge.kernels.optimized import tuning

    q, k, v, mask = _attention_inputs(np.random.default_rng(4), dtype)
    got = np.empty(q.shape[:-1] + v.shape[-1:], dtype)
    tuning.set_tuning("attention_scores_per_chunk", chunk)
    try:
        _fused("attention")(q, k, v, mask, 0.35, got)
    finally:
        tuning.set_tuning("attention_scores_per_chunk", None)
    _assert_attention_close(got, q, k, v, mask, 0.35)
    interleaved = np.empty(got.transpose(0, 2, 1, 3).shape, dtype)
    layout = [np.ascontiguousarray(a.transpose(0, 2, 1, 3)) for a in (q, k, v)]
    _fused("attention_interleaved")(*layout, mask, 0.35, interleaved)
    _assert_attention_close(interleaved.transpose(0, 2, 1, 3), q, k, v, mask, 0.35)


def _recurrent_inputs(rng, dtype, gates: int):
    steps, hidden, cell = (random_array(rng, shape, dtype) for shape in ((3, 2, gates * 4), (2, 4), (2, 4)))
    weight, bias = random_array(rng, (4, gates * 4), dtype), random_array(rng, gates * 4, dtype)
    return steps, hidden, cell, weight, bias


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_lstm_cell_gives_the_bits_of_its_chain(dtype):
    steps, hidden, cell, weight, bias = _recurrent_inputs(np.random.default_rng(6), dtype, 4)
    got = [np.empty((2, 4), dtype) for _ in range(2)]
    _fused("lstm_cell")(steps, bias, cell, hidden, weight, 1, *got)
    projected = run_portable("aten::addmm.out", bias, hidden, weight, 1, 1)
    gates = run_portable("aten::add.out", projected, steps[1], 1)
    i, f, g, o = (gates[:, 4 * n : 4 * n + 4] for n in range(4))
    sig = lambda a: run_portable("aten::sigmoid.out", a)  # noqa: E731
    tanh = lambda a: run_portable("aten::tanh.out", a)  # noqa: E731
    mul = lambda a, b: run_portable("aten::mul.out", a, b)  # noqa: E731
    new_cell = run_portable("aten::add.out", mul(sig(f), cell), mul(sig(i), tanh(g)), 1)
    np.testing.assert_array_equal(got[1], new_cell)
    np.testing.assert_array_equal(got[0], mul(sig(o), tanh(new_cell)))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_gru_cell_gives_the_bits_of_its_chain(dtype):
    steps, hidden, _, weight, bias = _recurrent_inputs(np.random.default_rng(7), dtype, 3)
    steps, weight, bias = steps[..., :12], weight[:, :12].copy(), bias[:12]
    got = np.empty((2, 4), dtype)
    _fused("gru_cell")(steps, bias, hidden, weight, 2, got)
    h = run_portable("aten::addmm.out", bias, hidden, weight, 1, 1)
    x = steps[2]
    r, z = (
        run_portable("aten::sigmoid.out", run_portable("aten::add.out", h[:, s], x[:, s], 1))
        for s in (slice(0, 4), slice(4, 8))
    )
    n = run_portable(
        "aten::tanh.out", run_portable("aten::add.out", x[:, 8:], run_portable("aten::mul.out", h[:, 8:], r), 1)
    )
    want = run_portable(
        "aten::add.out", run_portable("aten::mul.out", run_portable("aten::sub.out", hidden, n, 1), z), n, 1
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("stride, bounds", [((1, 1), (0.0, 6.0)), ((2, 2), None)], ids=["clamped", "strided"])
def test_inverted_residual(stride, bounds, dtype):
    """MobileNetV2's block: a 1x1 expansion, its clamp, a 3x3 depthwise convolution, its clamp and
    a 1x1 projection, each bias optional."""
    rng = np.random.default_rng(8)
    x = random_array(rng, (2, 4, 7, 6), dtype)
    expand, weight, project = (random_array(rng, s, dtype) for s in ((12, 4, 1, 1), (12, 1, 3, 3), (5, 12, 1, 1)))
    biases = [random_array(rng, n, dtype) for n in (12, 12, 5)]
    size = tuple((n + 2 - 3) // s + 1 for n, s in zip((7, 6), stride))
    got = np.empty((2, 5, *size), dtype)
    arrays = (x, expand, biases[0], weight, biases[1], project, biases[2])
    _fused("inverted_residual")(*arrays, bounds, list(stride), [1, 1], [1, 1], [1, 1], bounds, got)
    direct = np.empty_like(got)
    inverted_residual(bounds, DepthwiseGeometry(stride, (1, 1), (1, 1)), bounds, *arrays, direct)
    np.testing.assert_array_equal(direct, got)

    def chain(x, expand, weight, project, biases, clamp):
        clamped = (lambda a: run_portable("aten::hardtanh.out", a, *bounds)) if clamp and bounds else (lambda a: a)
        expanded = clamped(_conv(x, expand, biases[0]))
        filtered = clamped(_conv(expanded, weight, biases[1], stride, (1, 1), groups=12))
        return _conv(filtered, project, biases[2])

    bound = chain(*(np.abs(a) for a in (x, expand, weight, project)), [np.abs(b) for b in biases], False)
    assert_reassociated(got, chain(x, expand, weight, project, biases, True), bound, 4 + 9 + 12)


POOLS = [  # input, kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 9, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),  # windows apart: one strided view per tap
    ((2, 3, 9, 8), [3, 3], [2, 1], [1, 1], [1, 1], True),
    ((1, 2, 11, 10), [3, 2], [2, 3], [1, 0], [2, 3], True),  # dilated, clipped last windows
    ((1, 2, 5, 6, 7), [2, 3, 2], [2, 1, 2], [1, 1, 0], [1, 1, 2], False),
]


@pytest.mark.parametrize("dtype", [*FLOATS, np.int32, np.uint8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", POOLS, ids=[str(i) for i in range(len(POOLS))])
def test_max_pool_values_gives_the_values_of_max_pool_with_indices(spec, dtype):
    shape, kernel, stride, padding, dilation, ceil_mode = spec
    x = random_array(np.random.default_rng(9), shape, dtype)
    dims = len(kernel)
    op = f"aten::max_pool{dims}d_with_indices.out"
    want = run_portable(op, x, kernel, stride, padding, dilation, ceil_mode, outs=2)[0]
    got = np.empty(want.shape, dtype)
    _fused("max_pool_values")(x, kernel, stride, padding, dilation, ceil_mode, dims, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("size, stride", [((3, 4), (1, 3)), ((2, 3, 2), (12, 1, 6)), ((4,), (0,)), ((0, 2), (1, 1))])
def test_strided_copy_is_as_strided_copy(size, stride):
    x = random_array(np.random.default_rng(10), (4, 6), np.float32)
    got = np.empty(size, np.float32)
    _fused("strided_copy")(x, list(size), list(stride), got)
    np.testing.assert_array_equal(got, run_portable("aten::as_strided_copy.out", x, list(size), list(stride), 0))
