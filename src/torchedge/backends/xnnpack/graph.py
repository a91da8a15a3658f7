"""An XNNPACK delegate graph as an execution plan: value buffers and steps in node order.

Everything is laid out at load: constants are read (from the program's named data, or from the
constant data after the payload's flatbuffer in older payloads), every other value gets a buffer
of its static shape (outputs of views, such as reshapes, share their input's buffer), and each
node becomes one step that writes its output buffer in place. A run copies the delegate call's
inputs into their buffers, runs the steps and copies the outputs out, except where the graph is
laid out in the call's own arrays (below). Values are in XNNPACK's
layout: what the partitioner tagged channels-last is NHWC, and the graph carries the transposes.

Dynamic shapes: a payload exported with dynamic dimensions gives each value its upper-bound dims,
as ExecuTorch writes them. A call whose inputs have other shapes runs a plan laid out for those
shapes: each node's output shape follows from its inputs' (`output_dims`: broadcasting, fully
connected rows, reshape with its one inferred dim, concatenation, transposes, slices of whole
dims, windows...), as XNNPACK's ``xnn_reshape_runtime`` propagates them. Plans are kept per
input shapes (the few most recent), sharing the constants; outputs of another shape than the
call's output arguments are handed back for the runtime to resize them (`Plan.run`).

Arguments in place: a runtime passes a delegate call the same arrays every run (views into its
planned memory). Where they fit (the values' dtype and size, contiguous, outputs writable and
apart from every other argument), the graph is laid out once more with its external values in
those arrays, kept while the calls pass them: its nodes read the inputs where they are and write
the outputs where the caller reads them, with no copy in or out.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.buffer_reuse import BufferReuse
from torchedge.backends.xnnpack.constant_data import constant_reader
from torchedge.backends.xnnpack.fusion import PayloadGraph, plan_fusions
from torchedge.backends.xnnpack.node_shapes import output_dims, slice_dims
from torchedge.backends.xnnpack.plan import Plan, same_memory
from torchedge.backends.xnnpack.quantization import Quant, decode_quantized
from torchedge.backends.xnnpack.registry import BUILDERS, QUANTIZED_BUILDERS
from torchedge.errors import InvalidProgramError
from torchedge.fusion.options import FusionOptions

__all__ = ["NodeContext", "build_plan", "DTYPES"]

# XNNPACK datatypes of plain values this interpreter computes with (quantized ones: `quantization`).
DTYPES = {
    s.XNNDatatype.xnn_datatype_fp32: np.dtype(np.float32),
    s.XNNDatatype.xnn_datatype_fp16: np.dtype(np.float16),
    s.XNNDatatype.xnn_datatype_int32: np.dtype(np.int32),
}


class NodeContext:
    """What a node builder sees: its node's place in the graph and the value buffers."""

    def __init__(self, graph: _GraphValues, index: int, xnode: s.XNode):
        self._graph = graph
        self.index = index
        self.kind = type(xnode.xnode_union).__name__
        self.output_min_max = xnode.output_min_max

    def error(self, message: str) -> InvalidProgramError:
        return InvalidProgramError(f"XNNPACK node {self.index} ({self.kind}): {message}")

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            raise self.error(message)

    def value(self, value_id: int) -> np.ndarray:
        """The buffer of a value an earlier node (or the caller, or the constants) provides."""
        buffer = self._graph.buffers.get(value_id)
        if buffer is None:
            raise self.error(f"reads value {value_id}, which no earlier node computes")
        return buffer

    def optional(self, value_id: int) -> np.ndarray | None:
        """``value(value_id)``, or None for XNN_INVALID_VALUE_ID (an absent bias)."""
        return None if value_id == s.INVALID_VALUE_ID else self.value(value_id)

    def dims(self, value_id: int) -> tuple[int, ...]:
        return self._graph.tensor(value_id, self).dims

    def quant(self, value_id: int) -> Quant | None:
        """The quantization parameters of a quantized value, None for a plain one."""
        return self._graph.tensor(value_id, self).quant

    def output(self, value_id: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """A new buffer for the value this node computes; of ``shape`` instead of the value's
        dims when given (XNNPACK takes an element-wise output's shape from its input, so the
        payload's dims for it may be another layout of the same elements)."""
        return self._graph.allocate(value_id, self, shape)

    def alias(self, value_id: int, view: np.ndarray) -> None:
        """Makes the output ``value_id`` a view (``view``) of an input: no step computes it."""
        dims = self.dims(value_id)
        self.check(view.shape == dims, f"output {value_id} has shape {list(dims)}, its input gives {list(view.shape)}")
        self._graph.define(value_id, view, self)


@dataclass
class _Tensor:
    dims: tuple[int, ...]
    dtype: np.dtype
    value: s.XNNTensorValue
    quant: Quant | None = None
    nonbatch: int = 0  # dynamically quantized: the trailing dims each row's parameters cover

    def with_dims(self, dims: tuple[int, ...]) -> _Tensor:
        """This value at other dims; a dynamically quantized one gets parameters for its rows."""
        quant = self.quant
        if quant is not None and quant.dynamic:
            rows = math.prod(dims[: len(dims) - self.nonbatch])
            quant = dataclasses.replace(
                quant, rows=rows, row_scale=np.ones(rows, np.float32), row_zero_point=np.zeros(rows, np.int32)
            )
        return dataclasses.replace(self, dims=tuple(int(d) for d in dims), quant=quant)


class _GraphValues:
    def __init__(self, graph: s.XNNGraph, constants, known: dict[int, np.ndarray] | None = None):
        self.tensors: dict[int, _Tensor] = {}
        for index, xvalue in enumerate(graph.xvalues):
            value, quant, nonbatch = xvalue.xvalue_union, None, 0
            if isinstance(value, s.XNNQuantizedTensorValue):
                nonbatch = getattr(value.quant_params, "num_nonbatch_dims", 0) or 0
                value, dtype, quant = decode_quantized(index, value, constants.scales)
            elif not isinstance(value, s.XNNTensorValue):
                raise InvalidProgramError(f"XNNPACK value {index} is empty")
            else:
                dtype = DTYPES.get(value.datatype)
            if dtype is None:
                raise InvalidProgramError(
                    f"XNNPACK value {index} has datatype {value.datatype.name}, which is not supported yet "
                    f"(supported: {', '.join(d.name for d in DTYPES)})"
                )
            if value.id_out in self.tensors:
                raise InvalidProgramError(f"XNNPACK value id {value.id_out} is defined twice")
            self.tensors[value.id_out] = _Tensor(tuple(value.dims), dtype, value, quant, nonbatch)
        self.buffers: dict[int, np.ndarray] = {}
        for value_id, tensor in self.tensors.items():
            if tensor.value.constant_buffer_idx:
                known_buffer = None if known is None else known.get(value_id)
                self.buffers[value_id] = constants(value_id, tensor) if known_buffer is None else known_buffer
        self.constant_ids = [i for i, t in self.tensors.items() if t.value.constant_buffer_idx]
        self.external: dict[int, np.ndarray] = {}  # external outputs' arrays, where laid out in place
        self.reuse: BufferReuse | None = None

    def tensor(self, value_id: int, ctx: NodeContext) -> _Tensor:
        tensor = self.tensors.get(value_id)
        if tensor is None:
            raise ctx.error(f"refers to value {value_id}, which the graph does not define")
        return tensor

    def define(self, value_id: int, buffer: np.ndarray, ctx: NodeContext) -> None:
        if value_id in self.buffers:
            raise ctx.error(f"writes value {value_id}, which is already an input, a constant or an earlier output")
        self.buffers[value_id] = buffer
        if self.reuse is not None:
            self.reuse.defined(value_id, buffer)

    def allocate(self, value_id: int, ctx: NodeContext, shape: tuple[int, ...] | None = None) -> np.ndarray:
        tensor = self.tensor(value_id, ctx)
        if shape is not None and np.prod(shape, dtype=np.int64) != np.prod(tensor.dims, dtype=np.int64):
            raise ctx.error(f"value {value_id} has shape {list(tensor.dims)}, which does not hold {list(shape)}")
        given = self.external.get(value_id)
        if given is None:
            dims = tensor.dims if shape is None else shape
            buffer = np.zeros(dims, tensor.dtype) if self.reuse is None else self.reuse.take(dims, tensor.dtype)
        else:  # an external output in the caller's array (of this size, contiguous: `_fitting_views`)
            buffer = given if shape is None else given.reshape(shape)
        self.define(value_id, buffer, ctx)
        return buffer


def _externals(values: _GraphValues, ids: list[int], flag: int, what: str) -> list[int]:
    """Value ids of the external inputs or outputs, in the delegate's argument order (by external id)."""
    for value_id in ids:
        tensor = values.tensors.get(value_id)
        if tensor is None or not tensor.value.flags & flag:
            raise InvalidProgramError(f"XNNPACK graph: {what} {value_id} is not a value flagged as external {what}")
    return sorted(ids, key=lambda value_id: values.tensors[value_id].value.external_id)


def _clamp_step(ctx: NodeContext, out: np.ndarray | None) -> Callable | None:
    """The step applying the node's fused output clamp (``output_min_max``) to ``out``, if any."""
    bounds = ctx.output_min_max
    if bounds is None:
        return None
    low, high = bounds.output_min, bounds.output_max
    ctx.check(not low > high, f"output_min {low} is greater than output_max {high}")
    if low == -np.inf and high == np.inf:
        return None
    ctx.check(out is not None and out.flags.writeable, "has a fused output clamp but computes no output of its own")
    if high == np.inf:
        return functools.partial(np.maximum, out, low, out=out)
    if low == -np.inf:
        return functools.partial(np.minimum, out, high, out=out)
    return functools.partial(np.clip, out, low, high, out=out)


def _quantized_ids(values: _GraphValues, node) -> list[int]:
    """The quantized values a node reads or writes (its ``*_id`` fields)."""
    ids = [v for k, v in vars(node).items() if k.endswith("_id") and isinstance(v, int)]
    return [i for i in ids if i in values.tensors and values.tensors[i].quant is not None]


def _follow_shapes(node, ctx: NodeContext, values: _GraphValues, payload: dict[int, tuple[int, ...]]) -> None:
    """Gives the node's output the dims its inputs' dims make (`output_dims`) where an input's
    dims are not its payload dims."""
    fields = vars(node)
    inputs = [v for k, v in fields.items() if k.endswith("_id") and not k.startswith("output")]
    inputs = [i for i in inputs if isinstance(i, int) and i in values.tensors]
    if all(values.tensors[i].dims == payload[i] for i in inputs):
        return
    output_id = fields.get("output_id")
    if output_id not in values.tensors:
        raise ctx.error("has inputs of dynamic shape, which this node kind does not support yet")

    def dims(value_id: int) -> tuple[int, ...]:
        return ctx.dims(value_id)

    new: tuple[int, ...] | None
    try:
        if ctx.kind == "XNNStaticSlice":
            new = slice_dims(node, dims(node.input_id), payload[node.input_id])
        else:
            new = output_dims(node, ctx.kind, dims, payload[output_id])
    except (ValueError, IndexError, TypeError, AttributeError) as error:
        raise ctx.error(f"cannot follow its inputs' shapes {[list(dims(i)) for i in inputs]}: {error}") from None
    if new is None:
        raise ctx.error(
            f"has inputs of shapes {[list(dims(i)) for i in inputs]}, not the payload's "
            f"{[list(payload[i]) for i in inputs]}, and dynamic shapes are not supported for this node kind yet"
        )
    values.tensors[output_id] = values.tensors[output_id].with_dims(new)


def build_plan(
    graph: s.XNNGraph,
    constant_data: memoryview,
    named_data,
    input_shapes: tuple[tuple[int, ...], ...] | None = None,
    known_constants: dict[int, np.ndarray] | None = None,
    arrays: list[np.ndarray] | None = None,
    fusion: FusionOptions | None = None,
    workspace: np.ndarray | None = None,
) -> Plan:
    """Lays out values and steps for ``graph``; `InvalidProgramError` naming the node for
    anything malformed or not supported (an unknown node kind, a quantized value...).

    ``input_shapes``: the external inputs' shapes when not the payload's (dynamic dims), in
    delegate argument order; ``known_constants``: constant buffers already read, by value id;
    ``arrays``: the arrays of a call's arguments to lay the external values out in (inputs, then
    outputs, of the payload's shapes; see `Plan.run`); ``fusion``: the fusion rules to apply
    (`torchedge.backends.xnnpack.fusion`; default `FusionOptions()`, the exact ones);
    ``workspace``: uint8 bytes to lay the intermediate values out in (`BufferReuse`).
    """
    values = _GraphValues(graph, constant_reader(graph, constant_data, named_data), known_constants)
    input_ids = _externals(values, graph.input_ids, s.VALUE_FLAG_EXTERNAL_INPUT, "input")
    output_ids = _externals(values, graph.output_ids, s.VALUE_FLAG_EXTERNAL_OUTPUT, "output")
    if arrays is not None:
        values.external = dict(zip(output_ids, arrays[len(input_ids) :]))
    payload = {value_id: tensor.dims for value_id, tensor in values.tensors.items()}
    if input_shapes is not None:
        for value_id, shape in zip(input_ids, input_shapes):
            values.tensors[value_id] = values.tensors[value_id].with_dims(shape)
    for k, value_id in enumerate(input_ids):
        tensor = values.tensors[value_id]
        values.buffers[value_id] = np.zeros(tensor.dims, tensor.dtype) if arrays is None else arrays[k]
    plan = Plan([values.buffers[i] for i in input_ids], [])
    values.reuse = BufferReuse([x.xnode_union for x in graph.xnodes], set(output_ids), workspace)
    fusions = plan_fusions(PayloadGraph(graph.xnodes, values.tensors, set(output_ids)), fusion)
    grouped = {i: group for group in fusions.values() for i in group.nodes}
    for index, xnode in enumerate(graph.xnodes):
        node = xnode.xnode_union
        ctx = NodeContext(values, index, xnode)
        if node is None:
            raise ctx.error("the node is empty")
        quantized = _quantized_ids(values, node)
        build = (QUANTIZED_BUILDERS if quantized else BUILDERS).get(ctx.kind)
        if build is None:
            what = f"with quantized values {quantized}" if quantized else "type"
            raise ctx.error(f"this node {what} is not supported by torchedge's XNNPACK interpreter")
        if input_shapes is not None:
            _follow_shapes(node, ctx, values, payload)
        group = grouped.get(index)
        if group is not None and index != group.root:
            continue  # its group's root runs it
        members = [node] if group is None else [graph.xnodes[i].xnode_union for i in group.nodes]
        if group is None:
            step = build(node, ctx)
        else:
            step = group.build(ctx, members, group.arguments, node)
            ctx.kind = f"{group.rule}: " + " + ".join(type(n).__name__ for n in members)
        output_id = getattr(node, "output_id", None)
        # A quantized output's fused clamp is applied by its builder, in the quantized domain.
        output_quantized = output_id in values.tensors and values.tensors[output_id].quant is not None
        clamp = None if output_quantized else _clamp_step(ctx, values.buffers.get(output_id))
        if clamp is not None:
            ctx.check(step is not None, "has a fused output clamp but its output is a view of its input")
        plan.steps.extend((index, ctx.kind, s) for s in (step, clamp) if s is not None)
        for member in members:
            values.reuse.after(index, member)
    for value_id in output_ids:
        buffer = values.buffers.get(value_id)
        if buffer is None:
            raise InvalidProgramError(f"XNNPACK graph: no node computes output value {value_id}")
        plan.outputs.append(buffer)
    plan.scratch_bytes = values.reuse.nbytes
    if arrays is not None:  # outputs some node did not compute in place: views, inputs, constants
        outs = arrays[len(input_ids) :]
        plan.copies = [(b, out) for b, out in zip(plan.outputs, outs) if not same_memory(b, out)]
    elif input_shapes is None:
        known = {i: values.buffers[i] for i in values.constant_ids}
        again = functools.partial(build_plan, graph, constant_data, named_data, known_constants=known, fusion=fusion)
        plan.resize = plan.bind = again
    return plan
