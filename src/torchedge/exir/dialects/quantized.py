"""Out variants of the ``quantized_decomposed`` operators that PT2E quantization leaves in graphs.

`torchao`'s ``convert_pt2e`` (and ``torch.ao``) express a quantized model as float operators
between ``quantize_per_tensor`` / ``dequantize_per_*`` calls, with int8 weights. PyTorch
defines only their functional forms. torchedge defines the out variants, with the schemas of
ExecuTorch's quantized kernel library, in a namespace of its own (``torchedge_quantized``):
ExecuTorch's library registers the same names from C++ and aborts the process if they already
exist. In the ``.pte`` they carry ExecuTorch's names (`torchedge.exir.ir.pte_operator_name`), so
programs run on either runtime; when ExecuTorch's definitions are loaded, those are used as they are.
"""

from __future__ import annotations

import torch

from torchedge.exir.ir import QUANTIZED_NAMESPACE

__all__ = ["OUT_VARIANTS", "out_variant_candidates", "is_dequantize"]

# name.overload -> schema: ExecuTorch's quantized.yaml signatures.
OUT_VARIANTS = {
    "quantize_per_tensor.out": "(Tensor input, float scale, int zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_tensor.Tensor_out": "(Tensor input, Tensor scale, Tensor zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_tensor.out": "(Tensor input, float scale, int zero_point, int quant_min, int quant_max, "
    "ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_tensor.Tensor_out": "(Tensor input, Tensor scale, Tensor zero_point, int quant_min, "
    "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, "
    "Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_channel.out": "(Tensor input, Tensor scales, Tensor zero_points, int axis, int quant_min, "
    "int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_channel.out": "(Tensor input, Tensor scales, Tensor? zero_points, int axis, int quant_min, "
    "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, "
    "Tensor(a!) out) -> Tensor(a!)",
    "choose_qparams.Tensor_out": "(Tensor input, int quant_min, int quant_max, float eps, ScalarType dtype, *, "
    "Tensor(a!) scale_out, Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))",
}

_DEQUANTIZE = {"dequantize_per_tensor", "dequantize_per_channel"}
_LIBRARY = None


def _functional(name: str):
    """The functional overload an out variant stands for (``quantize_per_tensor.Tensor_out`` ->
    ``quantize_per_tensor.tensor``)."""
    packet_name, overload = name.split(".")
    packet = getattr(torch.ops.quantized_decomposed, packet_name)
    return getattr(packet, "default" if overload == "out" else overload.removesuffix("_out").lower())


def _implementation(name: str):
    functional = _functional(name)

    def run(*args, **kwargs):
        outs = [kwargs.pop(k) for k in ("out", "scale_out", "zero_point_out") if k in kwargs]
        results = functional(*args, **kwargs)
        results = results if isinstance(results, tuple) else (results,)
        for out, result in zip(outs, results):
            out.copy_(result)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return run


def _define_out_variants() -> None:
    global _LIBRARY
    if _LIBRARY is not None:
        return
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the functional forms)

    _LIBRARY = torch.library.Library(QUANTIZED_NAMESPACE, "DEF")
    for name, schema in OUT_VARIANTS.items():
        _LIBRARY.define(f"{name}{schema}")
        _LIBRARY.impl(name, _implementation(name), "CompositeExplicitAutograd")


def out_variant_candidates(op: torch._ops.OpOverload) -> list:
    """torchedge's out variants of the same operator as ``op`` (a ``quantized_decomposed`` op)."""
    _define_out_variants()
    packet = getattr(getattr(torch.ops, QUANTIZED_NAMESPACE), op.overloadpacket.__name__, None)
    return [getattr(packet, o) for o in packet.overloads()] if packet is not None else []


def is_dequantize(op) -> bool:
    """A dequantize call: folding it into a float constant would undo the int8 weights' saving."""
    return (
        isinstance(op, torch._ops.OpOverload)
        and op.namespace == "quantized_decomposed"
        and op._schema.name.split("::")[-1] in _DEQUANTIZE
    )
