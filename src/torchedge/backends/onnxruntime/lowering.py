"""Lower an Edge graph, or one partition of it, to an ONNX model.

This is torchedge's own translation (not ``torch.onnx``): each Edge operator
has a small translation in one of the ``ops_*`` modules, registered in
`registry`; this module decides what is supported, walks the graph, binds
inputs, constants and outputs, and assembles the model. Shapes are static and
read from ``node.meta["val"]``, as are dtypes, which are the truth: operands
are cast where ONNX would otherwise see mismatched types::

    ep = to_edge(torch.export.export(model, inputs)).exported_program()
    session = onnxruntime.InferenceSession(lower_exported_program(ep).SerializeToString())
"""

from __future__ import annotations

import operator

import numpy as np
import onnx
import torch
from onnx import helper
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

# The ops_* modules register their translations on import.
from torchedge.backends.onnxruntime import (  # noqa: F401  (translations register themselves)
    ops_creation,
    ops_elementwise,
    ops_index,
    ops_lowbit,
    ops_nn,
    ops_quantized,
    ops_reduce,
    ops_rotary,
    ops_shape,
)
from torchedge.backends.onnxruntime.builder import ONNX_DTYPES, GraphBuilder, value_info
from torchedge.backends.onnxruntime.fused_masks import all_of, scalar_branch
from torchedge.backends.onnxruntime.fused_norms import rms_norm
from torchedge.backends.onnxruntime.registry import NodeArgs, lowering_for
from torchedge.backends.onnxruntime.reshape_chains import merge_reshape_chains
from torchedge.errors import ExportError
from torchedge.exir.ir import constant_value, op_name
from torchedge.exir.source import describe_node

__all__ = ["is_supported", "lower_graph", "lower_exported_program", "MIN_OPSET", "MAX_OPSET"]

MIN_OPSET, MAX_OPSET = 17, 21  # LayerNormalization needs 17
_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
# Groups ending at a supported node written as fewer ONNX Runtime kernels: each returns the
# group's value, or None where the node does not end one (it is then translated alone).
_FUSIONS = (rms_norm, all_of, scalar_branch)


def _is_static_tensor(val) -> bool:
    return isinstance(val, torch.Tensor) and val.dtype in ONNX_DTYPES and all(isinstance(s, int) for s in val.shape)


def _has_static_rows(val) -> bool:
    """A tensor whose last dimension is static (the others may be symbolic)."""
    return (
        isinstance(val, torch.Tensor)
        and val.dtype in ONNX_DTYPES
        and val.dim() > 0
        and isinstance(val.shape[-1], int)
        and all(isinstance(s, (int, torch.SymInt)) for s in val.shape)
    )


def _tensor_values(node: torch.fx.Node) -> list:
    """The meta values of a node's outputs and of its tensor inputs."""
    own = node.meta.get("val")
    values = list(own) if isinstance(own, (list, tuple)) else [own]
    return values + [n.meta.get("val") for n in node.all_input_nodes]


def is_supported(node: torch.fx.Node) -> bool:
    """Whether `lower_graph` translates this call node (operator, arguments, dtypes, static shapes)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        source = node.args[0]
        return (
            isinstance(source, torch.fx.Node)
            and isinstance(source.meta.get("val"), (list, tuple))
            and is_supported(source)
        )
    lowering = lowering_for(node.target)
    if lowering is None:
        return False
    values = _tensor_values(node)
    if lowering.dynamic_rows:
        if not all(_is_static_tensor(v) or _has_static_rows(v) for v in values) or not _sizes_from_inputs(node):
            return False
    elif not all(_is_static_tensor(v) for v in values):
        return False
    return lowering.accepts(NodeArgs(node))


def _symbols(val) -> set[str]:
    return {str(symbol) for s in val.shape if not isinstance(s, int) for symbol in s.node.expr.free_symbols}


def _sizes_from_inputs(node: torch.fx.Node) -> bool:
    """Each symbolic size of the node's outputs is a function of its inputs' symbolic sizes (a
    delegate's outputs, whose sizes must be its inputs' sizes, are checked in `lower_graph`)."""
    own = node.meta.get("val")
    outputs = list(own) if isinstance(own, (list, tuple)) else [own]
    known = set().union(*(_symbols(n.meta["val"]) for n in node.all_input_nodes if _has_meta_tensor(n)))
    return all(_symbols(v) <= known for v in outputs)


def _has_meta_tensor(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), torch.Tensor)


def _describe(node: torch.fx.Node) -> str:
    what = op_name(node.target) if isinstance(node.target, torch._ops.OpOverload) else str(node.target)
    return f"{what} {describe_node(node)}"


def _needed_nodes(graph: torch.fx.Graph, inputs: set, outputs: list, constants: dict) -> list[torch.fx.Node]:
    """The nodes that compute ``outputs`` from ``inputs`` and constants, in graph order."""
    needed, stack = set(), list(outputs)
    while stack:
        node = stack.pop()
        if node in needed or node in inputs:
            continue
        needed.add(node)
        if node.op == "call_function":
            stack.extend(node.all_input_nodes)
        elif node.name not in constants:
            raise ExportError(
                f"the partition reads {node.op} '{node.name}', which is neither one of its "
                "inputs nor a constant: pass it in `inputs` or `constants`"
            )
    return [n for n in graph.nodes if n in needed]


def _constant_array(name: str, value) -> np.ndarray:
    if not isinstance(value, torch.Tensor) or value.dtype not in ONNX_DTYPES:
        raise ExportError(
            f"constant '{name}' must be a tensor of one of the dtypes "
            f"{sorted(map(str, ONNX_DTYPES))}, got {getattr(value, 'dtype', type(value).__name__)}"
        )
    return value.detach().contiguous().numpy()


def _io_value(node, role: str) -> torch.Tensor:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or not (_is_static_tensor(val) or _has_static_rows(val)):
        raise ExportError(
            f"{role} {node!r} of the lowered graph must be a tensor with a static last dimension and an "
            f"ONNX dtype, got {val!r}"
        )
    return val


def _check_output_sizes(inputs: list[torch.fx.Node], outputs: list[torch.fx.Node]) -> None:
    """Each symbolic size of an output is one of the inputs' (by name): the runtime sizes the
    outputs from the inputs' named dimensions."""
    named = {str(s) for n in inputs for s in n.meta["val"].shape if not isinstance(s, int)}
    for node in outputs:
        unknown = [str(s) for s in node.meta["val"].shape if not isinstance(s, int) and str(s) not in named]
        if unknown:
            raise ExportError(
                f"output {node!r} of the lowered graph has the symbolic size(s) {unknown}, which no input "
                "has: keep the node that computes it outside the partition"
            )


def _translate(g: GraphBuilder, node: torch.fx.Node) -> str | list[str]:
    """The node's value: a fused group's where it ends one (the group's other nodes are left
    unread, and dropped), else its own translation."""
    for fusion in _FUSIONS:
        value = fusion(g, node)
        if value is not None:
            return value
    return lowering_for(node.target).translate(g, NodeArgs(node))


def lower_graph(
    graph_module: torch.fx.GraphModule,
    inputs: list[torch.fx.Node],
    outputs: list[torch.fx.Node],
    constants: dict[str, torch.Tensor],
    opset: int = 17,
) -> onnx.ModelProto:
    """Translate what computes ``outputs`` from ``inputs`` into an ONNX model.

    ``inputs`` become graph inputs ``input_0, ...`` and ``outputs`` graph outputs
    ``output_0, ...``, in the order given. ``constants`` maps the names of the
    placeholders holding parameters, buffers and lifted constants to their values,
    which become initializers. Only the nodes the outputs need are translated.
    """
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ExportError(f"ONNX opset {opset} is not supported: use {MIN_OPSET} to {MAX_OPSET}")
    g = GraphBuilder(opset)
    input_infos = [value_info(g.fresh(f"input_{i}"), _io_value(n, "input")) for i, n in enumerate(inputs)]
    output_infos = [value_info(g.fresh(f"output_{i}"), _io_value(n, "output")) for i, n in enumerate(outputs)]
    _check_output_sizes(inputs, outputs)
    for node, info in zip(inputs, input_infos):
        g.bind(node, info.name)
    for node in _needed_nodes(graph_module.graph, set(inputs), list(outputs), constants):
        if node.op != "call_function":
            g.bind(node, g.constant(_constant_array(node.name, constants[node.name]), hint=node.name))
        elif not is_supported(node):
            raise ExportError(
                f"the ONNX lowering cannot translate {_describe(node)}: the operator, "
                "its arguments or its dtypes are not supported"
            )
        elif node.target is operator.getitem:
            g.bind(node, g.value(node.args[0])[node.args[1]])
        else:
            g.bind(node, _translate(g, node))
    for node, info in zip(outputs, output_infos):
        g.output(g.value(node), info.name)
    merge_reshape_chains(g)
    g.drop_unread()
    g.name_outputs_at_their_nodes()
    graph = helper.make_graph(g.nodes, "torchedge", input_infos, output_infos, initializer=g.used_initializers())
    opsets = [helper.make_opsetid("", opset)]
    if any(node.domain == ops_lowbit.MICROSOFT for node in g.nodes):
        opsets.append(helper.make_opsetid(ops_lowbit.MICROSOFT, 1))
    return helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="torchedge",
        ir_version=helper.find_min_ir_version_for(opsets, ignore_unknown=True),
    )


def lower_exported_program(ep: ExportedProgram, opset: int = 17) -> onnx.ModelProto:
    """The whole program as one ONNX model: user inputs in, user outputs out, constants as initializers."""
    signature = ep.graph_signature
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    constants, inputs = {}, []
    for spec in signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            inputs.append(placeholders[spec.arg.name])
        elif spec.kind in _CONSTANT_KINDS:
            constants[spec.arg.name] = constant_value(ep, spec.target)
        else:
            raise ExportError(f"cannot lower a program with a {spec.kind.name} input ('{spec.arg.name}') to ONNX")
    returned = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    outputs = []
    for spec, node in zip(signature.output_specs, returned):
        if spec.kind != OutputKind.USER_OUTPUT:
            raise ExportError(
                f"cannot lower a program with a {spec.kind.name} output to ONNX "
                "(ONNX models do not mutate their inputs)"
            )
        outputs.append(node)
    return lower_graph(ep.graph_module, inputs, outputs, constants, opset)
