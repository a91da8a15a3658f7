"""``torchedge_lowbit::linear`` (see `lowbit`) as ONNX Runtime's ``com.microsoft::MatMulNBits``.

The weight is packed as MatMulNBits reads it: values offset to unsigned (``q + 8`` for 4 bits,
``q + 128`` for 8), one row of blocks per output feature, two 4-bit values a byte (low nibble
first); zero points offset the same way (4-bit ones packed two a byte along the blocks); one
float32 scale per block. A torchao group wider than MatMulNBits' block spans several blocks of the
same scale. For 4-bit weights, ``accuracy_level`` 4 (int8 activations) stands for torchao's
dynamic int8 activations: MLAS quantizes each block of an activation row symmetrically where
torchao quantizes the whole row asymmetrically, so results differ by a few activation
quantization steps. 8-bit weights keep float activations (``accuracy_level`` 0, the dequantized
weight times the float activation): their int8 products would be unsigned 8-bit times signed
8-bit, which x86-64 CPUs without VNNI add in pairs with int16 saturation (see `runtime`).
The activation's leading dimensions may be dynamic (any number of tokens).
"""

from __future__ import annotations

import numpy as np
import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.lowbit import NAMESPACE, block_size_for
from torchedge.backends.onnxruntime.registry import FLOAT32, NodeArgs, lowers
from torchedge.errors import ExportError

__all__ = ["pack_weight"]

MICROSOFT = "com.microsoft"
_INT8_ACTIVATIONS, _FLOAT_ACTIVATIONS = 4, 0  # MatMulNBits' accuracy_level
_WEIGHT = ("qdata", "scale", "zero_point")


def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    """Unsigned ``bits``-bit values along the last axis, two a byte for 4 bits (an odd count padded)."""
    values = values.astype(np.uint8)
    if bits == 8:
        return values
    if values.shape[-1] % 2:
        values = np.concatenate([values, np.zeros((*values.shape[:-1], 1), np.uint8)], axis=-1)
    return values[..., 0::2] | (values[..., 1::2] << 4)


def pack_weight(qdata, scale, zero_point, bits: int, group_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(B, scales, zero_points, block_size) of MatMulNBits for torchao's integer weight ``qdata``
    [N, K] with per-group ``scale`` and ``zero_point`` [N, K / group_size]."""
    n, k = qdata.shape
    block = block_size_for(k, group_size)
    if block is None:
        raise ExportError(f"no MatMulNBits block size fits groups of {group_size} over {k} input features")
    offset = 1 << (bits - 1)
    repeat = group_size // block
    q = (np.asarray(qdata, np.int16) + offset).reshape(n, k // block, block)
    zero_points = np.repeat(np.asarray(zero_point, np.int16) + offset, repeat, axis=1)
    scales = np.repeat(np.asarray(scale, np.float32), repeat, axis=1)
    return _pack(q, bits), np.ascontiguousarray(scales), _pack(zero_points, bits), block


def _runs(a: NodeArgs) -> bool:
    """4 or 8 bits in groups MatMulNBits' blocks fit, and the weight, scales and zero points are the
    program's constants (placeholders, not computed)."""
    if a["bits"] not in (4, 8) or block_size_for(a.val("qdata").shape[-1], a["group_size"]) is None:
        return False
    return all(isinstance(a[name], torch.fx.Node) and a[name].op == "placeholder" for name in _WEIGHT)


@lowers(getattr(torch.ops, NAMESPACE).linear.default, dtypes=FLOAT32, check=_runs, dynamic_rows=True)
def _linear(g: GraphBuilder, a: NodeArgs) -> str:
    bits, group_size = a["bits"], a["group_size"]
    n, k = a.val("qdata").shape
    qdata, scale, zero_point = (g.constant_array(a[name]) for name in _WEIGHT)
    packed, scales, zero_points, block = pack_weight(qdata, scale, zero_point, bits, group_size)
    inputs = [g.tensor(a["x"]), g.constant(packed, "weight"), g.constant(scales, "scales")]
    inputs.append(g.constant(zero_points, "zero_points"))
    return g.emit(
        "MatMulNBits",
        inputs,
        domain=MICROSOFT,
        K=int(k),
        N=int(n),
        bits=bits,
        block_size=block,
        accuracy_level=_INT8_ACTIVATIONS if a["int8_activations"] and bits == 4 else _FLOAT_ACTIVATIONS,
    )
