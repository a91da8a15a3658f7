"""A partition's Edge program as an XNNPACK payload (`lower_program`, what ``preprocess`` runs):
its external inputs, each call node's translation (`lowering.translate`), its external outputs.

Inputs and outputs are NCHW float values, as ExecuTorch's are, or ``qint8`` where a quantized
value passes between delegates (or between a portable quantize and a delegate): an int8 input
takes the parameters of the static dequantizes that read it, and a quantize's int8 result
leaves as ``qint8``; any other quantized output is converted back to float32.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.aot.lowering import NCHW, QUANT_HOOKS, QUANTIZED_INPUT, Lowering, shape, translate
from torchedge.errors import ExportError

__all__ = ["lower_program"]


def _float_datatype(gm: torch.fx.GraphModule) -> s.XNNDatatype:
    """float16 for a partition of float16 operators (the partitioner keeps one float type a
    partition), else float32."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if node.op == "call_function" and isinstance(val, torch.Tensor) and val.dtype == torch.float16:
            return s.XNNDatatype.xnn_datatype_fp16
    return s.XNNDatatype.xnn_datatype_fp32


def _int8_input_params(node: torch.fx.Node) -> s.PerTensorQuant | None:
    """The parameters of an int8 input that static dequantizes read (they must agree), marking
    it for them (`QUANTIZED_INPUT`); None for other inputs."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype != torch.int8:
        return None
    params = {QUANT_HOOKS.dequantize_params(user) for user in node.users}
    if params == {None}:
        return None
    found = params.pop()
    if params or found is None:
        raise ExportError(f"XNNPACK lowering: int8 input '{node.name}' is not read by dequantizes of one scale")
    node.meta[QUANTIZED_INPUT] = True
    return s.PerTensorQuant(scale=found[0], zero_point=found[1])


def lower_program(ep: ExportedProgram) -> tuple[bytes, dict[str, bytes]]:
    """The XNNPACK payload of a partition's Edge program (every call node supported) and the
    named data its constants are in."""
    lw = Lowering(ep)
    gm = ep.graph_module
    lw.builder.float_datatype = _float_datatype(gm)
    constants = {n for n in gm.graph.nodes if n.op == "placeholder" and lw.constant(n) is not None}
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder" and n not in constants]
    for index, node in enumerate(inputs):
        params = _int8_input_params(node)
        if params is None:
            value_id = lw.output(node)
        else:  # a qint8 value crossing from another delegate or a portable quantize
            value_id = lw.builder.quantized_value(shape(node), s.XNNDatatype.xnn_datatype_qint8, params)
            lw.values[node] = {NCHW: value_id}
        lw.builder.mark_external(value_id, index, output=False)
    for node in gm.graph.nodes:
        if node.op == "call_function":
            translate(lw, node)
    (output_node,) = [n for n in gm.graph.nodes if n.op == "output"]
    outputs = output_node.args[0]
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    marked: set[int] = set()
    for index, node in enumerate(outputs):
        value_id = lw.get(node, NCHW)
        val = node.meta.get("val")
        int8 = isinstance(val, torch.Tensor) and val.dtype == torch.int8  # a quantize's result: qint8 out
        if lw.builder.quantization(value_id) is not None and not int8:  # a dequantized output: float32
            converted = lw.builder.value(lw.builder.tensor(value_id).dims)
            lw.node("XNNConvert", input_id=value_id, output_id=converted, flags=0)
            value_id = converted
        tensor = lw.builder.tensor(value_id)
        if value_id in marked or tensor.flags or tensor.constant_buffer_idx:
            # Already an external value (or a constant): the output gets a copy of its own.
            copy = lw.builder.like(value_id, tensor.dims)
            lw.node("XNNCopy", input_id=value_id, output_id=copy, flags=0)
            value_id = copy
        lw.builder.mark_external(value_id, len(inputs) + index, output=True)
        marked.add(value_id)
    return lw.builder.payload(), lw.builder.named_data
