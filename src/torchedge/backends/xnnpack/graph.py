"""An XNNPACK delegate graph as an execution plan: value buffers and steps in node order.

Everything is laid out at load: constants are read (from the program's named data, or from the
constant data after the payload's flatbuffer in older payloads), every other value gets a buffer
of its static shape (outputs of views, such as reshapes, share their input's buffer), and each
node becomes one step that writes its output buffer in place. A run copies the delegate call's
inputs into their buffers, runs the steps and copies the outputs out. Values are in XNNPACK's
layout: what the partitioner tagged channels-last is NHWC, and the graph carries the transposes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.quantization import Quant, decode_quantized
from torchedge.backends.xnnpack.registry import BUILDERS, QUANTIZED_BUILDERS
from torchedge.errors import InvalidProgramError, KernelError

__all__ = ["NodeContext", "Plan", "build_plan", "DTYPES"]

# XNNPACK datatypes of plain values this interpreter computes with (quantized ones: `quantization`).
DTYPES = {
    s.XNNDatatype.xnn_datatype_fp32: np.dtype(np.float32),
    s.XNNDatatype.xnn_datatype_fp16: np.dtype(np.float16),
    s.XNNDatatype.xnn_datatype_int32: np.dtype(np.int32),
}
_NO_CONSTANT = (1 << 64) - 1  # ConstantDataOffset.offset when the data is in the named data map


@dataclass
class Plan:
    """What a run does: copy ``inputs`` in, run ``steps``, copy ``outputs`` out."""

    inputs: list[np.ndarray]  # buffers of the external inputs, in delegate argument order
    outputs: list[np.ndarray]  # buffers of the external outputs, in delegate argument order
    steps: list[tuple[int, str, Callable]] = field(default_factory=list)  # (node index, kind, step)

    def run(self, args) -> None:
        n = len(self.inputs)
        if len(args) != n + len(self.outputs):
            raise KernelError(
                f"XnnpackBackend: expected {n} inputs and {len(self.outputs)} outputs, got {len(args)} values"
            )
        for buffer, arg in zip(self.inputs, args):
            if np.shape(arg) != buffer.shape:
                # A 0-d value is [1] in XNNPACK; anything else of another size was not compiled for.
                if np.size(arg) != buffer.size:
                    raise KernelError(
                        f"XnnpackBackend: input has shape {list(np.shape(arg))}, the delegate was compiled for "
                        f"{list(buffer.shape)} (XNNPACK payloads have static shapes)"
                    )
                arg = np.reshape(arg, buffer.shape)
            np.copyto(buffer, arg, casting="unsafe")
        for index, kind, step in self.steps:
            try:
                step()
            except (ArithmeticError, ValueError, TypeError, IndexError) as error:
                raise KernelError(f"XnnpackBackend: node {index} ({kind}) failed: {error}") from error
        for buffer, out in zip(self.outputs, args[n:]):
            np.copyto(out, buffer.reshape(out.shape), casting="unsafe")


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


class _GraphValues:
    def __init__(self, graph: s.XNNGraph, constants):
        self.tensors: dict[int, _Tensor] = {}
        for index, xvalue in enumerate(graph.xvalues):
            value, quant = xvalue.xvalue_union, None
            if isinstance(value, s.XNNQuantizedTensorValue):
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
            self.tensors[value.id_out] = _Tensor(tuple(value.dims), dtype, value, quant)
        self.buffers: dict[int, np.ndarray] = {}
        for value_id, tensor in self.tensors.items():
            if tensor.value.constant_buffer_idx:
                self.buffers[value_id] = constants(value_id, tensor)

    def tensor(self, value_id: int, ctx: NodeContext) -> _Tensor:
        tensor = self.tensors.get(value_id)
        if tensor is None:
            raise ctx.error(f"refers to value {value_id}, which the graph does not define")
        return tensor

    def define(self, value_id: int, buffer: np.ndarray, ctx: NodeContext) -> None:
        if value_id in self.buffers:
            raise ctx.error(f"writes value {value_id}, which is already an input, a constant or an earlier output")
        self.buffers[value_id] = buffer

    def allocate(self, value_id: int, ctx: NodeContext, shape: tuple[int, ...] | None = None) -> np.ndarray:
        tensor = self.tensor(value_id, ctx)
        if shape is not None and np.prod(shape, dtype=np.int64) != np.prod(tensor.dims, dtype=np.int64):
            raise ctx.error(f"value {value_id} has shape {list(tensor.dims)}, which does not hold {list(shape)}")
        buffer = np.zeros(tensor.dims if shape is None else shape, tensor.dtype)
        self.define(value_id, buffer, ctx)
        return buffer


def _constant_reader(graph: s.XNNGraph, constant_data: memoryview, named_data):
    """``read(value_id, tensor)``: the constant's bytes as a read-only array of the tensor's shape;
    ``read.scales(index, count)``: ``count`` float32 scales from constant ``index``."""

    def read(value_id: int, tensor: _Tensor) -> np.ndarray:
        where = f"XNNPACK value {value_id}: constant {tensor.value.constant_buffer_idx}"
        quant = tensor.quant
        if quant is None or not quant.packed:
            return array(tensor.value.constant_buffer_idx, tensor.dims, tensor.dtype, where)
        if len(tensor.dims) != 2:
            raise InvalidProgramError(f"{where}: 4-bit values must be 2-D, not {list(tensor.dims)}")
        rows, columns = tensor.dims
        raw = array(tensor.value.constant_buffer_idx, (rows, (columns + 1) // 2), np.dtype(np.uint8), where)
        values = quant.unpack(raw, columns)
        values.flags.writeable = False
        return values

    def scales(index: int, count: int, dtype: np.dtype | None = None) -> np.ndarray:
        dtype = np.dtype(np.float32) if dtype is None else dtype
        return array(index, (count,), dtype, f"XNNPACK scales: constant {index}")

    def array(index: int, dims: tuple[int, ...], dtype: np.dtype, where: str) -> np.ndarray:
        if index >= len(graph.constant_data):
            raise InvalidProgramError(f"{where} is past the {len(graph.constant_data)} entries of constant_data")
        entry = graph.constant_data[index]
        if entry.named_key:
            data = named_data.get(entry.named_key)
        elif entry.offset != _NO_CONSTANT and entry.offset + entry.size <= len(constant_data):
            data = constant_data[entry.offset : entry.offset + entry.size]
        else:
            raise InvalidProgramError(
                f"{where} at offset {entry.offset} (+{entry.size}) is outside the payload's "
                f"{len(constant_data)} bytes of constant data"
            )
        if data is None:
            raise InvalidProgramError(f"{where}: the named data has no entry {entry.named_key!r}")
        nbytes = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
        if len(data) < nbytes:
            raise InvalidProgramError(f"{where} has {len(data)} bytes, its shape {list(dims)} needs {nbytes}")
        result = np.frombuffer(data, dtype=dtype, count=nbytes // dtype.itemsize).reshape(dims)
        if result.ctypes.data % dtype.itemsize:
            result = result.copy()
        result.flags.writeable = False
        return result

    read.scales = scales
    return read


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


def build_plan(graph: s.XNNGraph, constant_data: memoryview, named_data) -> Plan:
    """Lays out values and steps for ``graph``; `InvalidProgramError` naming the node for
    anything malformed or not supported (an unknown node kind, a quantized value...)."""
    values = _GraphValues(graph, _constant_reader(graph, constant_data, named_data))
    input_ids = _externals(values, graph.input_ids, s.VALUE_FLAG_EXTERNAL_INPUT, "input")
    output_ids = _externals(values, graph.output_ids, s.VALUE_FLAG_EXTERNAL_OUTPUT, "output")
    for value_id in input_ids:
        tensor = values.tensors[value_id]
        values.buffers[value_id] = np.zeros(tensor.dims, tensor.dtype)
    plan = Plan([values.buffers[i] for i in input_ids], [])
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
        step = build(node, ctx)
        output_id = getattr(node, "output_id", None)
        # A quantized output's fused clamp is applied by its builder, in the quantized domain.
        output_quantized = output_id in values.tensors and values.tensors[output_id].quant is not None
        clamp = None if output_quantized else _clamp_step(ctx, values.buffers.get(output_id))
        if clamp is not None:
            ctx.check(step is not None, "has a fused output clamp but its output is a view of its input")
        plan.steps.extend((index, ctx.kind, s) for s in (step, clamp) if s is not None)
    for value_id in output_ids:
        buffer = values.buffers.get(value_id)
        if buffer is None:
            raise InvalidProgramError(f"XNNPACK graph: no node computes output value {value_id}")
        plan.outputs.append(buffer)
    return plan
