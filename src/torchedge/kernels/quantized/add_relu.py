"""``quantized_decomposed::add_relu.out``: the quantized add followed by ReLU, as the chain
dequantize -> add -> relu -> quantize computes it. ExecuTorch's quantized kernel library has
no kernel of this name; its QuantFusion pass emits the operator, and torchedge's runs it.

ReLU before quantizing equals a floor at the output zero point after it: rounding and clamping
are monotone and map 0 to the zero point, so ``max(quantize(s), clamp(zero_point))`` is
``quantize(max(s, 0))`` exactly.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.shape_rules import same_as
from torchedge.kernels.quantized.decomposed_extra import add_into_out
from torchedge.kernels.registry import register_kernel

__all__ = ["quantized_add_relu"]


@register_kernel("quantized_decomposed::add_relu.out", shape=same_as())
def quantized_add_relu(
    a, a_scale, a_zero_point, a_quant_min, a_quant_max,
    b, b_scale, b_zero_point, b_quant_min, b_quant_max,
    out_scale, out_zero_point, out_quant_min, out_quant_max, out,
):  # fmt: skip
    add_into_out(
        "quantized_decomposed::add_relu.out",
        a, a_scale, a_zero_point, a_quant_min, a_quant_max,
        b, b_scale, b_zero_point, b_quant_min, b_quant_max,
        out_scale, out_zero_point, out_quant_min, out_quant_max, out,
    )  # fmt: skip
    np.maximum(out, min(max(out_zero_point, out_quant_min), out_quant_max), out=out)
