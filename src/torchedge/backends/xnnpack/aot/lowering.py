"""Lowering an Edge partition to an XNNPACK graph: the operator registry and the walk.

Each supported Edge operator has a translation (``ops_*`` modules) registered with `lowers`:
a ``check(node, ep)`` that says whether it translates this node exactly, and a
``translate(lw, node)`` that appends XNNPACK nodes through `Lowering`. `is_supported` (what the
partitioner tags) and `translate` (what `program.lower_program` calls for each node of a
partition) use the same registry, so a tagged node always lowers.

Layouts. XNNPACK's convolutions and poolings read and write NHWC, the Edge graph is NCHW. A
node's result may exist in both layouts (`Lowering.get`): an NHWC consumer of an NCHW value
gets a transpose (``XNNStaticTranspose``, perm 0,2,3,1) made once and shared, and the other way
round; when H*W or C is 1 the two layouts hold the same bytes and the conversion is a reshape.
Element-wise operators keep the layout of their inputs, so a chain conv -> relu -> pool stays
NHWC; the delegate's inputs and outputs are NCHW, as ExecuTorch's are.

Quantized patterns. Nodes that `QUANT_HOOKS.in_domain` claims (set by `ops_quantized`: the
``quantized_decomposed`` operators and the operators between them) use the translations
registered with `lowers_quantized` instead, without the float32 rules; `Lowering.output` gives
a quantized node's result the parameters `QUANT_HOOKS.output_params` reads off the quantize
that follows it, and a dequantized delegate output is converted back to float32. An operator
inside a quantized pattern with no quantized translation that takes it runs in float32 between
converts (`Lowering.translate_in_float`), as ExecuTorch's lowering runs a pad there.

Float types and shapes. A partition computes in one float type (float32 or float16, `shapes`),
and a value with dynamic dims is written at their upper bound (``lowers(..., dynamic=...)`` says
where a translation holds at every size in range; inside quantized patterns, `QUANT_HOOKS.dynamic`:
the dynamically quantized linear layers, whose parameters XNNPACK computes per call).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.aot.builder import GraphBuilder
from torchedge.backends.xnnpack.aot.shapes import dynamic_dims, float_tensor, shape
from torchedge.errors import ExportError
from torchedge.exir.ir import constant_value

__all__ = [
    "NCHW",
    "NHWC",
    "SYM_SIZE",
    "Lowering",
    "constant_array",
    "lowers",
    "lowers_quantized",
    "QUANT_HOOKS",
    "is_supported",
    "translate",
    "TO_NHWC",
    "TO_NCHW",
    "shape",
]

NCHW, NHWC = "nchw", "nhwc"
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)
_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
SYM_SIZE, _VIEW = torch.ops.aten.sym_size.int, torch.ops.aten.view_copy.default


@dataclass(frozen=True)
class _Translation:
    check: Callable[[torch.fx.Node, ExportedProgram], bool]
    translate: Callable[[Lowering, torch.fx.Node], None]
    dynamic: Callable[[torch.fx.Node], bool] = lambda node: False


_TRANSLATIONS: dict = {}


def lowers(*targets, check: Callable | None = None, dynamic: Callable | None = None):
    """Registers the decorated ``translate(lw, node)`` for ``targets`` (Edge operators), taking
    the float32 or float16 nodes ``check(node, ep)`` accepts (all, without one); nodes with
    dynamic dims only where ``dynamic(node)`` says the translation holds at every size in range
    (none, without one)."""

    def decorate(fn):
        for target in targets:
            _TRANSLATIONS[target] = _Translation(check or (lambda node, ep: True), fn, dynamic or (lambda node: False))
        return fn

    return decorate


_QUANTIZED: dict = {}


@dataclass
class _QuantHooks:
    """Set by `ops_quantized`: whether a node belongs to a quantized pattern (its inputs or
    result pass through ``quantized_decomposed`` operators), the parameters of a quantized
    pattern node's result (None: float), whether such a node may run in float32 between
    converts, and whether its translation holds at every size of its dynamic dims."""

    in_domain: Callable[[torch.fx.Node, ExportedProgram], bool] = lambda node, ep: False
    output_params: Callable[[torch.fx.Node, ExportedProgram], object] = lambda node, ep: None
    computes_in_float: Callable[[torch.fx.Node, ExportedProgram], bool] = lambda node, ep: False
    dynamic: Callable[[torch.fx.Node, ExportedProgram], bool] = lambda node, ep: False
    dequantize_params: Callable[[torch.fx.Node], tuple | None] = lambda node: None  # of a static int8 dequantize


QUANT_HOOKS = _QuantHooks()
QUANTIZED_INPUT = "xnnpack_quantized_input"  # meta key `program.lower_program` sets on a partition's int8 inputs


def _quantized(target) -> _Translation | None:
    """The quantized translation of ``target`` (registered as the operator or by its name,
    ``namespace.name.overload``)."""
    found = _QUANTIZED.get(target)
    if found is None and isinstance(target, torch._ops.OpOverload):
        found = _QUANTIZED.get(str(target))
    return found


def lowers_quantized(*targets, check: Callable):
    """Registers the decorated ``translate(lw, node)`` for ``targets`` (operators or their names)
    inside quantized patterns
    (`QUANT_HOOKS.in_domain`), taking the nodes ``check(node, ep)`` accepts; no dtype rules."""

    def decorate(fn):
        for target in targets:
            _QUANTIZED[target] = _Translation(check, fn)
        return fn

    return decorate


# ----------------------------------------------------------------------------
# What the partitioner may tag


def _is_scalar_constant(node: torch.fx.Node, ep: ExportedProgram) -> bool:
    """A one-element constant of another dtype (a Python scalar the compiler made a tensor, int64
    when it was an int): the operator computes in float32, so it is used as float32."""
    val = node.meta.get("val")
    return (
        isinstance(val, torch.Tensor)
        and val.numel() == 1
        and (val.dtype.is_floating_point or not val.dtype.is_complex)
        and constant_placeholder(node, ep) is not None
    )


def constant_placeholder(node: torch.fx.Node, ep: ExportedProgram) -> torch.Tensor | None:
    """The tensor of a parameter, buffer or lifted constant placeholder, else None."""
    if node.op != "placeholder":
        return None
    for spec in ep.graph_signature.input_specs:
        if spec.arg.name == node.name and spec.kind in _CONSTANT_KINDS and spec.target is not None:
            if spec.kind == InputKind.BUFFER and spec.target in ep.graph_signature.buffers_to_mutate.values():
                return None
            return constant_value(ep, spec.target)
    return None


def constant_array(node, ep: ExportedProgram) -> np.ndarray | None:
    """The value of ``node`` as a float32 array when it is a constant (a parameter, buffer or
    lifted tensor, or a permute/view of one), else None."""
    if not isinstance(node, torch.fx.Node):
        return None
    tensor = constant_placeholder(node, ep)
    if tensor is not None:
        return tensor.detach().to(torch.float32).contiguous().numpy()
    if node.op == "call_function" and node.target in _FOLDABLE:
        source = constant_array(node.args[0], ep)
        if source is not None:
            return _FOLDABLE[node.target](source, node)
    return None


def is_supported(node: torch.fx.Node, ep: ExportedProgram) -> bool:
    """Whether `translate` translates this call node exactly (operator, arguments, one float type,
    static shapes); ``getitem`` follows its source."""
    if node.op != "call_function":
        return False
    if QUANT_HOOKS.in_domain(node, ep):
        if any(dynamic_dims(n) for n in (node, *node.all_input_nodes)) and not QUANT_HOOKS.dynamic(node, ep):
            return False
        if _quantized_translation(node, ep) is not None:
            return True
        return QUANT_HOOKS.computes_in_float(node, ep) and _float_supported(node, ep)
    return _float_supported(node, ep)


def _quantized_translation(node: torch.fx.Node, ep: ExportedProgram) -> _Translation | None:
    """The quantized translation that takes ``node``, else None."""
    quantized = _quantized(node.target)
    return quantized if quantized is not None and quantized.check(node, ep) else None


def _float_supported(node: torch.fx.Node, ep: ExportedProgram) -> bool:
    if node.target is operator.getitem:
        source = node.args[0]
        return isinstance(source, torch.fx.Node) and bool(node.args[1] == 0) and is_supported(source, ep)
    translation = _TRANSLATIONS.get(node.target)
    if translation is None:
        return False
    own = node.meta.get("val")
    outputs = list(own) if isinstance(own, (list, tuple)) else [own]
    if not float_tensor(outputs[0]):
        return False
    dtype = outputs[0].dtype  # one float type in and out: a partition holds one
    for n in node.all_input_nodes:
        val = n.meta.get("val")
        if n.target is SYM_SIZE and node.target is _VIEW:
            continue  # a reshape's dynamic size: the payload infers it
        if not (float_tensor(val) and val.dtype == dtype) and not _is_scalar_constant(n, ep):
            return False
    if any(dynamic_dims(n) for n in (node, *node.all_input_nodes)) and not translation.dynamic(node):
        return False
    return bool(translation.check(node, ep))


# ----------------------------------------------------------------------------
# The walk


def permuted(dims, perm) -> list[int]:
    return [dims[i] for i in perm]


class Lowering:
    """One partition's translation: the graph builder and the XNNPACK values of each node."""

    def __init__(self, ep: ExportedProgram):
        self.ep = ep
        self.builder = GraphBuilder()
        self.values: dict[torch.fx.Node, dict[str, int]] = {}  # node -> layout -> value id
        self.producers: dict[int, object] = {}  # value id -> the XNode computing it
        self.users: dict[torch.fx.Node, int] = {}
        self.float_results: set[torch.fx.Node] = set()  # quantized-pattern nodes run in float32
        self.dequantized: dict[torch.fx.Node, dict[str, int]] = {}  # float32 copies of qint8 values

    # Constants --------------------------------------------------------------

    def constant(self, node) -> np.ndarray | None:
        return constant_array(node, self.ep)

    # Values -----------------------------------------------------------------

    def get(self, node: torch.fx.Node, layout: str = NCHW) -> int:
        """The id of ``node``'s value in ``layout``, converting (once) if needed."""
        known = self.values.setdefault(node, {})
        if layout in known:
            return known[layout]
        data = self.constant(node)
        if data is not None:
            if layout == NHWC:
                data = data.transpose(TO_NHWC)
            known[layout] = self.builder.value(data.shape, data)
            return known[layout]
        if not known:
            raise ExportError(f"XNNPACK lowering: node '{node.name}' is read before any node computes it")
        other = NHWC if layout == NCHW else NCHW
        known[layout] = self.convert(known[other], shape(node), to=layout, static=not dynamic_dims(node))
        return known[layout]

    def layouts(self, node: torch.fx.Node) -> dict[str, int]:
        return self.values.get(node, {})

    def convert(self, value_id: int, nchw_dims, to: str, static: bool = True) -> int:
        """A new value holding ``value_id`` in layout ``to`` (``nchw_dims``: the NCHW shape, its
        dynamic dims at their upper bound unless ``static``)."""
        perm = TO_NHWC if to == NHWC else TO_NCHW
        src_dims = self.builder.tensor(value_id).dims
        out_dims = permuted(src_dims, perm)
        out = self.builder.like(value_id, out_dims)
        n, c, h, w = nchw_dims
        if static and (c == 1 or h * w == 1):  # same bytes in both layouts
            self.builder.node("XNNStaticReshape", num_dims=4, new_shape=out_dims, input_id=value_id, output_id=out)
        else:
            self.builder.node("XNNStaticTranspose", num_dims=4, perm=list(perm), input_id=value_id, output_id=out)
        return out

    def output(self, node: torch.fx.Node, layout: str = NCHW, dims=None) -> int:
        """A new value for ``node``'s result in ``layout`` (its shape permuted for NHWC)."""
        dims = shape(node) if dims is None else dims
        if layout == NHWC:
            dims = permuted(dims, TO_NHWC)
        params = None if node in self.float_results else QUANT_HOOKS.output_params(node, self.ep)
        if params is None:
            value_id = self.builder.value(dims)
        else:
            value_id = self.builder.quantized_value(dims, s.XNNDatatype.xnn_datatype_qint8, params)
        self.values.setdefault(node, {})[layout] = value_id
        return value_id

    def alias(self, node: torch.fx.Node, source: torch.fx.Node) -> None:
        """``node``'s result is ``source``'s (a getitem, a fused activation)."""
        self.values[node] = self.values[source]

    def node(self, kind: str, output_min_max=None, **fields):
        xnode = self.builder.node(kind, output_min_max, **fields)
        output_id = fields.get("output_id")
        if output_id is not None:
            self.producers[output_id] = xnode
        return xnode

    def translate_in_float(self, node: torch.fx.Node) -> None:
        """``node``'s float32 translation on float32 copies of its quantized inputs (an
        ``XNNConvert`` each, made once); its result is float32, for the quantize after it."""
        saved = {}
        for x in node.all_input_nodes:
            known = self.values.get(x, {})
            if not any(self.builder.quantization(v) is not None for v in known.values()):
                continue
            if x not in self.dequantized:
                layout = self.preferred_layout(x)
                source = known[layout]
                out = self.builder.value(self.builder.tensor(source).dims)
                self.node("XNNConvert", input_id=source, output_id=out, flags=0)
                self.dequantized[x] = {layout: out}
            saved[x], self.values[x] = known, self.dequantized[x]
        self.float_results.add(node)
        try:
            _TRANSLATIONS[node.target].translate(self, node)
        finally:
            self.values.update(saved)

    def preferred_layout(self, node: torch.fx.Node) -> str:
        """NHWC for a 4-D value that some node already computed in NHWC only."""
        known = self.layouts(node)
        return NHWC if NHWC in known and NCHW not in known else NCHW


_FOLDABLE: dict = {
    torch.ops.aten.permute_copy.default: lambda a, node: np.ascontiguousarray(a.transpose(node.args[1])),
    torch.ops.aten.view_copy.default: lambda a, node: a.reshape(shape(node)),
}


def translate(lw: Lowering, node: torch.fx.Node) -> None:
    """Appends the XNNPACK nodes of one call node of a partition (its quantized translation, its
    float32 one between converts, or its float one); an unsupported node is an `ExportError`."""
    ep = lw.ep
    if QUANT_HOOKS.in_domain(node, ep):
        if not is_supported(node, ep):
            raise ExportError(f"XNNPACK lowering: node '{node.name}' ({node.target}) is not supported")
        quantized = _quantized_translation(node, ep)
        if quantized is None:
            lw.translate_in_float(node)
        else:
            quantized.translate(lw, node)
        return
    if node.target is operator.getitem:
        lw.alias(node, node.args[0])
        return
    if node.target is SYM_SIZE:
        return  # read by reshapes, which infer it
    translation = _TRANSLATIONS.get(node.target)
    if translation is None or not is_supported(node, ep):
        raise ExportError(f"XNNPACK lowering: node '{node.name}' ({node.target}) is not supported")
    translation.translate(lw, node)
