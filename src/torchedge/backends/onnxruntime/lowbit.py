"""torchao's quantized linear layers as one operator, ``torchedge_lowbit::linear``, that the ONNX
Runtime lowering turns into ``com.microsoft::MatMulNBits`` (MLAS's packed 4- and 8-bit kernels).

torchedge's ``to_edge`` decomposes torchao's ``dequantize_affine`` into ATen, which leaves a
weight that is dequantized to float32 on every call. `use_lowbit_linears` replaces each
``nn.Linear`` whose weight is a torchao ``IntxUnpackedToInt8Tensor`` (what ``--qlinear
8da4w|8da8w|4w|8w`` make) by a `LowBitLinear` that calls the operator on the integer weight,
its scales and zero points; in eager it computes what the torchao layer computes.
"""

from __future__ import annotations

import torch

__all__ = ["LowBitLinear", "NAMESPACE", "block_size_for", "use_lowbit_linears"]

NAMESPACE = "torchedge_lowbit"
_SCHEMA = (
    "linear(Tensor x, Tensor qdata, Tensor scale, Tensor zero_point, int bits, int group_size, "
    "bool int8_activations) -> Tensor"
)
_ASYMMETRIC_PER_TOKEN = "int8_asym_per_token"  # torchao's name of 8da*'s activation quantization
_BITS = {torch.int4: 4, torch.int8: 8}
_LIBRARY = torch.library.Library(NAMESPACE, "DEF")
_LIBRARY.define(_SCHEMA)


def _eager(x, qdata, scale, zero_point, bits: int, group_size: int, int8_activations: bool):
    """What torchao's layer computes: its weight tensor rebuilt around the same data."""
    from torchao.quantization import IntxUnpackedToInt8Tensor

    target = torch.int4 if bits == 4 else torch.int8
    weight = IntxUnpackedToInt8Tensor(
        qdata, scale, zero_point, target, (1, group_size), x.dtype, _ASYMMETRIC_PER_TOKEN if int8_activations else None
    )
    return torch.nn.functional.linear(x, weight)


def _shape(x, qdata, scale, zero_point, bits: int, group_size: int, int8_activations: bool):
    return x.new_empty((*x.shape[:-1], qdata.shape[0]))


_LIBRARY.impl("linear", _eager, "CompositeExplicitAutograd")
torch.library.register_fake(f"{NAMESPACE}::linear", _shape, lib=_LIBRARY)


def block_size_for(in_features: int, group_size: int) -> int | None:
    """MatMulNBits' block size for groups of ``group_size``: the largest power of two from 16 to
    256 that divides the group (a group spans several blocks of the same scale); None if none does."""
    for block in (256, 128, 64, 32, 16):
        if group_size % block == 0 and in_features % block == 0:
            return block
    return None


class LowBitLinear(torch.nn.Module):
    """A torchao-quantized linear layer (no bias) as a ``torchedge_lowbit::linear`` call on its integer weight."""

    def __init__(self, qdata, scale, zero_point, bits: int, group_size: int, int8_activations: bool):
        super().__init__()
        self.register_buffer("qdata", qdata)
        self.register_buffer("scale", scale)
        self.register_buffer("zero_point", zero_point)
        self.bits, self.group_size, self.int8_activations = bits, group_size, int8_activations

    def forward(self, x):
        op = getattr(torch.ops, NAMESPACE).linear
        return op(x, self.qdata, self.scale, self.zero_point, self.bits, self.group_size, self.int8_activations)


def _lowbit(layer: torch.nn.Module) -> LowBitLinear | None:
    """The layer as a `LowBitLinear`, or None when its weight is not one MatMulNBits runs."""
    from torchao.quantization import IntxUnpackedToInt8Tensor

    weight = getattr(layer, "weight", None)
    if getattr(layer, "bias", None) is not None or not isinstance(weight, IntxUnpackedToInt8Tensor):
        return None
    bits = _BITS.get(weight.target_dtype)
    out_features, in_features = weight.shape
    rows, group_size = weight.block_size
    if bits is None or rows != 1 or weight.dtype != torch.float32 or in_features % group_size:
        return None
    if weight.activation_quantization not in (None, _ASYMMETRIC_PER_TOKEN):
        return None
    if block_size_for(in_features, group_size) is None:
        return None
    groups = in_features // group_size
    scale = weight.scale.detach().reshape(out_features, groups).to(torch.float32)
    zero_point = weight.zero_point.detach().reshape(out_features, groups).to(torch.int8)
    return LowBitLinear(
        weight.qdata.detach(), scale, zero_point, bits, group_size, weight.activation_quantization is not None
    )


def use_lowbit_linears(model: torch.nn.Module) -> int:
    """Replace, in place, each torchao-quantized ``nn.Linear`` MatMulNBits runs by a `LowBitLinear`;
    returns how many were replaced. (An LM head tied to the embedding has its own quantized weight
    since torchao's ``quantize_``; the embedding keeps the float one.)"""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Linear):
                lowbit = _lowbit(child)
                if lowbit is not None:
                    setattr(parent, name, lowbit)
                    replaced += 1
    return replaced
