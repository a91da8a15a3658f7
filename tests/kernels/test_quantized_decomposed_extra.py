"""The quantized_decomposed kernels of torchedge.kernels.quantized.decomposed_extra against
ExecuTorch's own kernels (the ``.out`` overloads that ``executorch.kernels.quantized`` loads into
torch run ExecuTorch's C++ kernels) and, for the embeddings, the Python references of
``executorch.exir.passes._quant_patterns_and_replacements``."""

import pytest
import torch

pytest.importorskip("executorch")

import executorch.exir.passes._quant_patterns_and_replacements  # noqa: E402, F401  (embedding references)
import executorch.kernels.quantized  # noqa: E402, F401  (ExecuTorch's quantized kernels)

import torchedge.kernels.quantized.decomposed_extra  # noqa: E402, F401  (until the package imports it)
from tests.kernels.harness import run_case_and_shape  # noqa: E402

qd = torch.ops.quantized_decomposed
g = torch.Generator().manual_seed(0)


def _x(*shape, scale=3.0):
    return torch.randn(shape, generator=g) * scale


# -- per token --------------------------------------------------------------------------------


def _choose_qparams_per_token(x, dtype):
    shape = x.shape[:-1] + (1,)
    scale, zero_point = torch.empty(shape, dtype=torch.float64), torch.empty(shape, dtype=torch.int64)
    return qd.choose_qparams_per_token_asymmetric.out(x, dtype, scale_out=scale, zero_point_out=zero_point)


@pytest.mark.parametrize(
    "x",
    [
        _x(4, 16),
        _x(2, 3, 8),
        _x(3, 1000),  # long rows: ExecuTorch's parallel path
        torch.zeros(2, 5),  # a zero range: scale 0.1
        torch.full((2, 4), 1e-7),  # a tiny range: the small-scale threshold
        torch.tensor([[0.0, 1e-6, 2e-6], [-1e-6, 0.0, 0.0], [-1e-6, 1e-6, 3e-7]]),
        _x(3, 7).abs(),  # non-negative rows
        -_x(3, 7).abs(),  # non-positive rows
    ],
    ids=["2d", "3d", "long", "zeros", "tiny", "tiny-mixed", "positive", "negative"],
)
def test_choose_qparams_per_token_asymmetric(x):
    run_case_and_shape(
        "quantized_decomposed::choose_qparams_per_token_asymmetric.out",
        _choose_qparams_per_token,
        x,
        torch.int8,
        noncontiguous=False,
    )


def _quantize_per_token(x, scales, zero_points, quant_min, quant_max, dtype):
    return qd.quantize_per_token.out(
        x, scales, zero_points, quant_min, quant_max, dtype, out=torch.empty(x.shape, dtype=dtype)
    )


def _dequantize_per_token(q, scales, zero_points, quant_min, quant_max, dtype, output_dtype):
    out = torch.empty(q.shape, dtype=output_dtype)
    return qd.dequantize_per_token.out(q, scales, zero_points, quant_min, quant_max, dtype, output_dtype, out=out)


def test_quantize_per_token_round_trip():
    x = _x(2, 3, 16)
    scale, zero_point = _choose_qparams_per_token(x, torch.int8)
    run_case_and_shape(
        "quantized_decomposed::quantize_per_token.out", _quantize_per_token, x, scale, zero_point, -128, 127, torch.int8
    )
    q = _quantize_per_token(x, scale, zero_point, -128, 127, torch.int8)
    run_case_and_shape(
        "quantized_decomposed::dequantize_per_token.out",
        _dequantize_per_token,
        q,
        scale,
        zero_point,
        -128,
        127,
        torch.int8,
        torch.float32,
    )


def test_quantize_per_token_ties_and_clamping():
    x = torch.tensor([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1000.0, -1000.0]]) * 0.1
    scale, zero_point = torch.tensor([[0.1]], dtype=torch.float64), torch.tensor([[3]])
    run_case_and_shape(
        "quantized_decomposed::quantize_per_token.out", _quantize_per_token, x, scale, zero_point, -128, 127, torch.int8
    )


# -- quantized add ----------------------------------------------------------------------------


def _add(a, a_s, a_z, a_lo, a_hi, b, b_s, b_z, b_lo, b_hi, o_s, o_z, o_lo, o_hi):
    out = torch.empty(a.shape, dtype=a.dtype)
    return qd.add.out(a, a_s, a_z, a_lo, a_hi, b, b_s, b_z, b_lo, b_hi, o_s, o_z, o_lo, o_hi, out=out)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32])
def test_quantized_add(dtype):
    a = torch.randint(0, 256, (3, 17), generator=g).to(dtype)
    b = torch.randint(0, 256, (3, 17), generator=g).to(dtype)
    run_case_and_shape(
        "quantized_decomposed::add.out", _add, a, 0.02, 120, 0, 255, b, 0.035, 131, 0, 255, 0.04, 100, 0, 255
    )
    run_case_and_shape(  # the result saturates at the narrow output range
        "quantized_decomposed::add.out", _add, a, 0.5, 0, 0, 255, b, 0.5, 0, 0, 255, 0.1, 10, 5, 200
    )


# -- embeddings -------------------------------------------------------------------------------

INDICES = torch.tensor([[0, 3, 4], [4, 1, 0]])


def _packed(bits: int, rows: int, dim: int):
    if bits == 8:
        return torch.randint(-128, 128, (rows, dim), generator=g, dtype=torch.int8)
    return torch.randint(0, 256, (rows, dim * bits // 8), generator=g, dtype=torch.uint8)


@pytest.mark.parametrize("bits,name", [(8, "embedding_byte"), (4, "embedding_4bit"), (2, "embedding_2bit")])
@pytest.mark.parametrize("groups", [0, 1, 4])  # 0: per-channel 1-D scales
@pytest.mark.parametrize("zero_points", [True, False])
def test_embeddings(bits, name, groups, zero_points):
    weight = _packed(bits, 5, 16)
    scale_shape = (5,) if groups == 0 else (5, groups)
    scales = torch.rand(scale_shape, generator=g) + 0.05
    zps = torch.randint(-3, 3, scale_shape, generator=g).float() if zero_points else None
    low, high = {8: (-128, 127), 4: (-8, 7), 2: (-2, 1)}[bits]
    op = getattr(qd, name)
    run_case_and_shape(f"quantized_decomposed::{name}.out", op.default, weight, scales, zps, low, high, INDICES)
    half = scales.half(), None if zps is None else zps.half()

    def with_dtype(w, s, z, lo, hi, i, dtype):
        return op.dtype(w, s, z, lo, hi, i, dtype=dtype)

    run_case_and_shape(
        f"quantized_decomposed::{name}.dtype_out", with_dtype, weight, *half, low, high, INDICES, torch.float16
    )


def test_embedding_byte_uint8_weight_and_1d_indices():
    weight = torch.randint(0, 256, (6, 8), generator=g, dtype=torch.uint8)
    scales, zps = torch.rand(6, generator=g) + 0.1, torch.full((6,), 128.0)
    run_case_and_shape(
        "quantized_decomposed::embedding_byte.out", qd.embedding_byte.default, weight, scales, zps, 0, 255,
        torch.tensor([5, 0, 2]),
    )  # fmt: skip


# -- int8-weight matrix products --------------------------------------------------------------


def _mixed_mm(x, w, s, z):
    return qd.mixed_mm.out(x, w, s, z, out=torch.empty((x.shape[0], w.shape[1])))


def _mixed_linear(x, w, s, z, dtype):
    return qd.mixed_linear.out(x, w, s, z, dtype, out=torch.empty((x.shape[0], w.shape[0]), dtype=dtype))


def test_mixed_mm():
    x, w = _x(4, 12), torch.randint(-128, 128, (12, 5), generator=g, dtype=torch.int8)
    run_case_and_shape(
        "quantized_decomposed::mixed_mm.out", _mixed_mm, x, w, torch.rand(12, generator=g) * 0.1, None, rtol=1e-5
    )


@pytest.mark.parametrize("groups", [0, 1, 3, 4])
def test_mixed_linear(groups):
    x, w = _x(4, 12), torch.randint(-128, 128, (5, 12), generator=g, dtype=torch.int8)
    scales = torch.rand((5,) if groups == 0 else (5, groups), generator=g) * 0.1
    run_case_and_shape(
        "quantized_decomposed::mixed_linear.out", _mixed_linear, x, w, scales, None, torch.float32, rtol=1e-5
    )
