"""Eager calls of the operators ExecuTorch's own libraries define (quantized_decomposed, llama,
dim_order_ops, et_copy, preprocess), for the shape-function checks of `test_shapes`: torch knows
them once ExecuTorch's Python packages register them. Empty when ExecuTorch is not installed."""

from __future__ import annotations

import torch

from tools.qa.aten_calls import AtenCall

aten = torch.ops.aten
NAMESPACES = ("quantized_decomposed::", "llama::", "dim_order_ops::", "et_copy::", "preprocess::")


def _call(op, *args, expected=None, **kwargs) -> AtenCall:
    return AtenCall(op, args, kwargs, op(*args, **kwargs) if expected is None else expected)


def _register() -> bool:
    try:
        import executorch.exir.passes._device_copy_ops_registry  # noqa: F401
        import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401
        import executorch.exir.passes.dim_order_ops_registry  # noqa: F401
        import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401
        import executorch.extension.llm.custom_ops.op_tile_crop_aot  # noqa: F401
        import executorch.kernels.quantized  # noqa: F401
    except ImportError:
        return False
    return True


AVAILABLE = _register()


def _copies_and_layout() -> list:
    x = torch.randn(2, 3, 4)
    return [
        _call(aten.detach_copy.default, x),
        _call(aten.lift_fresh_copy.default, x),
        _call(aten.fill.Tensor, x, torch.tensor(2.0)),
        _call(aten.linear.default, x, torch.randn(5, 4), torch.randn(5)),
        _call(aten.split_copy.Tensor, torch.randn(7, 3), 3),
        _call(torch.ops.dim_order_ops._empty_dim_order.default, [2, 3], dim_order=[0, 1]),
        _call(torch.ops.et_copy._h2d_copy.default, x),
        _call(torch.ops.et_copy._d2h_copy.default, x),
        _call(torch.ops.preprocess.tile_crop.default, torch.randn(3, 8, 8), 4),
    ]


def _llm() -> list:
    llama = torch.ops.llama
    q, kv, cache = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 2, 8), torch.randn(1, 6, 2, 8)
    delta = [torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 5), torch.rand(1, 2, 3) + 0.5]
    delta += [torch.rand(1, 2, 3), torch.randn(1, 2, 8, 5)]
    qint = [torch.randint(-128, 128, (1, s, 2, 8), dtype=torch.int8) for s in (2, 6, 6)]
    qparams = [p for s in (2, 6, 6) for p in (torch.zeros(1, s, 2, 1, dtype=torch.int8), torch.rand(1, s, 2, 1) * 0.1)]
    blob, moe_out = torch.zeros(4, 8, dtype=torch.uint8), torch.empty(3, 32)
    moe = (torch.randn(3, 32), torch.randn(4, 32), torch.empty(0), blob, blob, 2, 4, 48, 32, 16, 4, "softmax", 1.0)
    return [
        _call(llama.update_cache.default, kv, cache.clone(), 1),
        _call(llama.update_cache_with_indices.default, kv, cache.clone(), 0, torch.tensor([[4, 1]])),
        _call(llama.custom_sdpa.default, q, cache, cache, 2, None, 0.0, True),
        _call(llama.sdpa_with_kv_cache.default, q, kv, kv, cache.clone(), cache.clone(), 2, 2, None, 0.0, True),
        _call(llama.custom_quantized_sdpa.default, *qint, 2, None, 0.0, True, None, *qparams),
        _call(llama.fast_hadamard_transform.default, torch.randn(3, 56)),
        _call(llama.fallback.default, torch.randn(2, 3)),
        _call(llama.gated_delta_rule.default, *delta),
        _call(llama.channelwise_gated_delta_rule.default, *delta[:3], torch.rand(1, 2, 3, 8) + 0.5, *delta[4:]),
        _call(llama.quantized_moe_ffn.out, *moe, out=moe_out, expected=moe_out),
    ]


def _quantized() -> list:
    qd = torch.ops.quantized_decomposed
    x = torch.randn(2, 3, 4)
    u8, scales = torch.randint(0, 256, (5, 8), dtype=torch.uint8), torch.rand(5, 2) + 0.1
    token_scales, token_zps = torch.rand(2, 3, 1) * 0.1, torch.zeros(2, 3, 1)
    rows, one = torch.tensor([[0, 4], [2, 1]]), torch.tensor([3])
    half_out, out16, out32 = torch.empty(2, 8, dtype=torch.float16), torch.empty(1, 16), torch.empty(1, 32)
    return [
        _call(qd.choose_qparams_per_token_asymmetric.default, x, torch.int8),
        _call(qd.quantize_per_token.default, x, token_scales, token_zps, -128, 127, torch.int8),
        _call(
            qd.dequantize_per_token.default,
            x.to(torch.int8),
            token_scales,
            token_zps,
            -128,
            127,
            torch.int8,
            torch.float32,
        ),
        _call(
            qd.add.out, u8, 0.1, 3, 0, 255, u8, 0.2, 5, 0, 255, 0.3, 4, 0, 255, out=torch.empty(5, 8, dtype=torch.uint8)
        ),
        _call(qd.embedding_byte.default, u8, scales, None, 0, 255, rows),
        _call(
            qd.embedding_byte.dtype_out,
            u8,
            scales.half(),
            None,
            0,
            255,
            torch.tensor([3, 1]),
            dtype=torch.float16,
            out=half_out,
            expected=half_out,
        ),
        _call(qd.embedding_4bit.default, u8, scales, None, -8, 7, rows),
        _call(
            qd.embedding_4bit.dtype_out, u8, scales, None, -8, 7, one, dtype=torch.float32, out=out16, expected=out16
        ),
        _call(qd.embedding_2bit.default, u8, scales, None, -2, 1, rows),
        _call(
            qd.embedding_2bit.dtype_out, u8, scales, None, -2, 1, one, dtype=torch.float32, out=out32, expected=out32
        ),
        _call(
            qd.mixed_mm.out,
            torch.randn(3, 8),
            torch.randint(-128, 128, (8, 5), dtype=torch.int8),
            torch.rand(8),
            None,
            out=torch.empty(3, 5),
        ),
        _call(qd.mixed_linear.out, torch.randn(3, 8), u8.to(torch.int8), scales, None, out=torch.empty(3, 5)),
    ]


def executorch_calls() -> list:
    """The calls, or none when ExecuTorch (which defines these operators for torch) is missing."""
    return [*_copies_and_layout(), *_llm(), *_quantized()] if AVAILABLE else []
