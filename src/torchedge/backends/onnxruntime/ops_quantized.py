"""PT2E's quantize / dequantize operators as ONNX QuantizeLinear / DequantizeLinear.

ONNX Runtime fuses the DequantizeLinear -> MatMul / Conv -> QuantizeLinear chains of a
quantized model into int8 kernels. QuantizeLinear saturates to the whole range of its dtype
and divides by the scale where PyTorch multiplies by its inverse: a quantize with a narrower
``[quant_min, quant_max]`` stays on the portable kernels, and a value on a rounding boundary
may land one step away from PyTorch's (as with any int8 backend).
"""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed operators)

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.registry import NodeArgs, lowers

__all__: list[str] = []  # translations register themselves; nothing to import

qd = torch.ops.quantized_decomposed
INT8S = frozenset({torch.int8, torch.uint8})


def _input_dtype(a: NodeArgs) -> torch.dtype:
    return a["dtype"]


def _whole_range(a: NodeArgs) -> bool:
    info = torch.iinfo(a["dtype"])
    return (a["quant_min"], a["quant_max"]) == (info.min, info.max)


def _float32_out(a: NodeArgs) -> bool:
    return a["out_dtype"] in (None, torch.float32)


def _per_channel_parameters(g: GraphBuilder, a: NodeArgs, scales: str, zero_points: str | None) -> list[str]:
    """Scales as float32 and zero points in the quantized dtype, as QuantizeLinear wants them."""
    inputs = [g.tensor(a[scales], torch.float32)]
    if zero_points is not None and a[zero_points] is not None:
        inputs.append(g.tensor(a[zero_points], a["dtype"]))
    return inputs


@lowers(qd.quantize_per_tensor.default, dtypes=INT8S, check=_whole_range)
def _quantize_per_tensor(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit(
        "QuantizeLinear",
        [
            g.tensor(a["input"], torch.float32),
            g.scalar(a["scale"], torch.float32),
            g.scalar(a["zero_point"], a["dtype"]),
        ],
    )


@lowers(qd.dequantize_per_tensor.default, dtypes=INT8S, dtype_of=_input_dtype, check=_float32_out)
def _dequantize_per_tensor(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit(
        "DequantizeLinear",
        [g.tensor(a["input"]), g.scalar(a["scale"], torch.float32), g.scalar(a["zero_point"], a["dtype"])],
    )


@lowers(qd.quantize_per_channel.default, dtypes=INT8S, check=_whole_range)
def _quantize_per_channel(g: GraphBuilder, a: NodeArgs) -> str:
    inputs = [g.tensor(a["input"], torch.float32), *_per_channel_parameters(g, a, "scales", "zero_points")]
    return g.emit("QuantizeLinear", inputs, axis=a["axis"])


@lowers(qd.dequantize_per_channel.default, dtypes=INT8S, dtype_of=_input_dtype, check=_float32_out)
def _dequantize_per_channel(g: GraphBuilder, a: NodeArgs) -> str:
    inputs = [g.tensor(a["input"]), *_per_channel_parameters(g, a, "scales", "zero_points")]
    return g.emit("DequantizeLinear", inputs, axis=a["axis"])
