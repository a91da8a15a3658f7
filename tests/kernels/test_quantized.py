"""Kernels of the quantized_decomposed operators against PyTorch's reference implementations."""

import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the reference operators)

from tools.qa.kernel_check import Status, check_call
from torchedge.errors import KernelError
from torchedge.kernels.registry import get_kernel

qd = torch.ops.quantized_decomposed
g = torch.Generator().manual_seed(0)


def _x(*shape):
    return torch.randn(shape, generator=g) * 3


# values exactly halfway between quantization steps: round half to even must match
TIES = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1000.0, -1000.0]) * 0.1
Q8 = torch.randint(-128, 128, (2, 3, 4), generator=g, dtype=torch.int8)
QU8 = torch.randint(0, 256, (4, 5), generator=g, dtype=torch.uint8)
SCALES, ZERO_POINTS = torch.rand(3, generator=g) + 0.05, torch.randint(-4, 4, (3,), generator=g)

CASES = {
    "quantize_per_tensor": (qd.quantize_per_tensor.default, (_x(2, 3, 4), 0.05, 3, -128, 127, torch.int8)),
    "quantize_per_tensor-ties": (qd.quantize_per_tensor.default, (TIES, 0.1, 0, -128, 127, torch.int8)),
    "quantize_per_tensor-uint8": (qd.quantize_per_tensor.default, (_x(4, 5), 0.02, 128, 0, 255, torch.uint8)),
    "quantize_per_tensor-narrow": (qd.quantize_per_tensor.default, (_x(7), 0.1, 0, -127, 127, torch.int8)),
    "quantize_per_tensor-bf16": (qd.quantize_per_tensor.default, (_x(6).bfloat16(), 0.1, 1, -128, 127, torch.int8)),
    "quantize_per_tensor.tensor": (
        qd.quantize_per_tensor.tensor,
        (_x(3, 4), torch.tensor([0.07]), torch.tensor([-2]), -128, 127, torch.int8),
    ),
    "dequantize_per_tensor": (qd.dequantize_per_tensor.default, (Q8, 0.05, 3, -128, 127, torch.int8)),
    "dequantize_per_tensor-uint8": (qd.dequantize_per_tensor.default, (QU8, 0.02, 128, 0, 255, torch.uint8)),
    "dequantize_per_tensor.tensor": (
        qd.dequantize_per_tensor.tensor,
        (Q8, torch.tensor(0.3), torch.tensor(-1), -128, 127, torch.int8),
    ),
    "quantize_per_channel-axis1": (
        qd.quantize_per_channel.default,
        (_x(2, 3, 4), SCALES, ZERO_POINTS, 1, -128, 127, torch.int8),
    ),
    "quantize_per_channel-axis0": (
        qd.quantize_per_channel.default,
        (_x(3, 5), SCALES, ZERO_POINTS, 0, -127, 127, torch.int8),
    ),
    "dequantize_per_channel-axis1": (
        qd.dequantize_per_channel.default,
        (Q8, SCALES, ZERO_POINTS, 1, -128, 127, torch.int8),
    ),
    "dequantize_per_channel-no-zero-points": (
        qd.dequantize_per_channel.default,
        (Q8[0].T.contiguous(), SCALES, None, 1, -128, 127, torch.int8),
    ),
    "choose_qparams": (qd.choose_qparams.tensor, (_x(5, 6), -128, 127, 1e-5, torch.int8)),
    "choose_qparams-positive": (qd.choose_qparams.tensor, (_x(8).abs() + 1, 0, 255, 1e-5, torch.uint8)),
    "choose_qparams-negative": (qd.choose_qparams.tensor, (-_x(8).abs() - 1, -128, 127, 1e-5, torch.int8)),
    "choose_qparams-constant": (qd.choose_qparams.tensor, (torch.zeros(4), -128, 127, 1e-5, torch.int8)),
}


@pytest.mark.parametrize("name", CASES)
def test_kernel_matches_pytorch(name):
    op, args = CASES[name]
    result = check_call(op, args, {}, op(*args))
    assert result.status is Status.PASS, str(result)


def test_dequantize_rejects_a_dtype_the_call_does_not_name():
    kernel = get_kernel("quantized_decomposed::dequantize_per_tensor.out")
    with pytest.raises(KernelError, match="int8"):
        kernel.fn(QU8.numpy(), 0.1, 0, -128, 127, 1, None, torch.empty(4, 5).numpy())  # 1: int8
