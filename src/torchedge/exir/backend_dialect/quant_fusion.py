"""`QuantFusion`: the dequantize -> operator -> quantize chains of PT2E-quantized graphs become the
quantized operators of ExecuTorch's ``kernels/quantized`` library.

* ``dequantize_per_tensor`` of two uint8 tensors -> ``add.Tensor`` [-> ``relu``] ->
  ``quantize_per_tensor`` becomes ``quantized_decomposed::add`` (``add_relu``);
* ``dequantize_per_channel`` of a uint8 or int8 weight along its rows -> ``embedding`` becomes
  ``quantized_decomposed::embedding_byte``.

The operators are defined in torchedge's own namespace (`torchedge.exir.ir.QUANTIZED_NAMESPACE`:
ExecuTorch's library may define the same names in this process), and a `.pte` names them as
ExecuTorch does. A chain is fused only where the kernel computes exactly what the chain computes:
the add kernel takes two tensors of one shape and quantization ranges within [0, 255].
ExecuTorch's runtime has kernels for ``add.out`` and ``embedding_byte.out``, none for
``add_relu.out`` (its own QuantFusion pass emits the operator all the same); torchedge's runtime
has all three.
"""

from __future__ import annotations

import torch

from torchedge.exir.backend_dialect.ops import bind_pattern_to_op
from torchedge.exir.backend_dialect.replacement import BackendOpReplacement
from torchedge.exir.ir import QUANTIZED_NAMESPACE

__all__ = ["QuantFusion", "QUANTIZED_SCHEMAS"]

_QPARAMS = "float {0}_scale, int {0}_zero_point, int {0}_quant_min, int {0}_quant_max"
_BINARY = f"(Tensor a, {_QPARAMS.format('a')}, Tensor b, {_QPARAMS.format('b')}, {_QPARAMS.format('out')}) -> Tensor"
QUANTIZED_SCHEMAS = {  # ExecuTorch's signatures (exir/passes/_quant_patterns_and_replacements.py)
    "add": _BINARY,
    "add_relu": _BINARY,
    "embedding_byte": "(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min, "
    "int weight_quant_max, Tensor indices) -> Tensor",
}
_LIBRARY: torch.library.Library | None = None


class QuantFusion(BackendOpReplacement):
    """Fuse the quantized chains ExecuTorch's quantized kernels compute in one step (see the module)."""

    def __init__(self):
        _bind()
        super().__init__(QUANTIZED_NAMESPACE)


def _qd():
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines quantized_decomposed)

    return torch.ops.quantized_decomposed


def _embedding_byte(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices):
    """The eager operator, for uint8 and int8 weights alike."""
    qd = _qd()
    rows = qd.dequantize_per_channel.default(
        weight, weight_scales, weight_zero_points, 0, weight_quant_min, weight_quant_max, weight.dtype
    )
    return torch.ops.aten.embedding.default(rows, indices)


def _define() -> torch.library.Library:
    library = torch.library.Library(QUANTIZED_NAMESPACE, "FRAGMENT")
    for name, schema in QUANTIZED_SCHEMAS.items():
        library.define(f"{name}{schema}")
    library.impl("embedding_byte", _embedding_byte, "CompositeExplicitAutograd")
    return library


def _bind() -> None:
    """Define the operators and bind their patterns, once."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    _LIBRARY = _define()
    qd = _qd()
    _bind_add(qd, "add_relu", torch.ops.aten.relu.default)  # before add: the larger pattern first
    _bind_add(qd, "add", lambda z: z)
    for dtype in (torch.uint8, torch.int8):
        _bind_embedding(qd, dtype)


def _bind_add(qd, name: str, activation) -> None:
    """uint8 tensors dequantized, added, ``activation``, quantized: also the operator's eager kernel."""

    @bind_pattern_to_op(_LIBRARY, name, guard=_fusable_add)
    def quantized_add(a, a_scale, a_zero_point, a_quant_min, a_quant_max, b, b_scale, b_zero_point, b_quant_min,
                      b_quant_max, out_scale, out_zero_point, out_quant_min, out_quant_max):  # fmt: skip
        x = qd.dequantize_per_tensor.default(a, a_scale, a_zero_point, a_quant_min, a_quant_max, torch.uint8)
        y = qd.dequantize_per_tensor.default(b, b_scale, b_zero_point, b_quant_min, b_quant_max, torch.uint8)
        z = activation(torch.ops.aten.add.Tensor(x, y))
        return qd.quantize_per_tensor.default(z, out_scale, out_zero_point, out_quant_min, out_quant_max, torch.uint8)


def _bind_embedding(qd, dtype: torch.dtype) -> None:
    @bind_pattern_to_op(_LIBRARY, "embedding_byte", guard=_fusable_embedding)
    def quantized_embedding(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices):
        rows = qd.dequantize_per_channel.default(
            weight, weight_scales, weight_zero_points, 0, weight_quant_min, weight_quant_max, dtype
        )
        return torch.ops.aten.embedding.default(rows, indices)


def _val(value):
    return value.meta.get("val") if isinstance(value, torch.fx.Node) else None


def _fusable_add(values: dict) -> bool:
    """Two static tensors of one shape, literal parameters, every range within [0, 255]."""
    a, b = _val(values["a"]), _val(values["b"])
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    static = all(isinstance(s, int) for s in (*a.shape, *b.shape))
    if not static or tuple(a.shape) != tuple(b.shape):
        return False
    for side in ("a", "b", "out"):
        low, high = values[f"{side}_quant_min"], values[f"{side}_quant_max"]
        if not (isinstance(values[f"{side}_scale"], float) and isinstance(values[f"{side}_zero_point"], int)):
            return False
        if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high <= 255):
            return False
    return True


def _fusable_embedding(values: dict) -> bool:
    """A 2-D weight with one float32 scale (and float32 zero point, if any) per row, literal ranges."""
    weight, scales = _val(values["weight"]), _val(values["weight_scales"])
    zero_points = values["weight_zero_points"]
    if not (isinstance(weight, torch.Tensor) and isinstance(scales, torch.Tensor) and weight.dim() == 2):
        return False
    if scales.dtype != torch.float32 or tuple(scales.shape) != (weight.shape[0],):
        return False
    if zero_points is not None:  # ExecuTorch's kernel takes them in the output's dtype, and aborts otherwise
        val = _val(zero_points)
        if not isinstance(val, torch.Tensor) or val.dtype != torch.float32 or tuple(val.shape) != (weight.shape[0],):
            return False
    return isinstance(values["weight_quant_min"], int) and isinstance(values["weight_quant_max"], int)
