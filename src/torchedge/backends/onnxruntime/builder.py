"""`GraphBuilder`: the ONNX nodes, initializers and value names of one graph being lowered.

Each distinct constant is one initializer: equal constants share it, and a large constant
holding the same bytes as another under a different shape (a folded reshape of a weight) is
a Reshape of it, which ONNX Runtime folds when it loads the model.
"""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from torchedge.errors import ExportError
from torchedge.exir.dtypes import numpy_dtype_of

__all__ = ["GraphBuilder", "ONNX_DTYPES", "tensor_type", "numpy_dtype", "value_info"]

_TYPES = {  # torch dtype -> ONNX element type
    torch.bool: TensorProto.BOOL,
    torch.uint8: TensorProto.UINT8,
    torch.int8: TensorProto.INT8,
    torch.int16: TensorProto.INT16,
    torch.int32: TensorProto.INT32,
    torch.int64: TensorProto.INT64,
    torch.float16: TensorProto.FLOAT16,
    torch.float32: TensorProto.FLOAT,
    torch.float64: TensorProto.DOUBLE,
}
ONNX_DTYPES = frozenset(_TYPES)  # the dtypes a lowered graph may carry

# Constants above this many elements holding the bytes of another of a different shape are a
# Reshape of it; smaller ones (shapes, axes, pads) stay initializers of their own.
_RESHAPED_CONSTANT_SIZE = 16


def tensor_type(dtype: torch.dtype) -> int:
    return _TYPES[dtype]


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    if dtype not in _TYPES:
        raise KeyError(dtype)
    return numpy_dtype_of(dtype)


def value_info(name: str, val: torch.Tensor) -> onnx.ValueInfoProto:
    """A graph input or output typed like the (fake) tensor ``val``; a symbolic size is a named dimension."""
    dims = [int(s) if isinstance(s, int) else str(s) for s in val.shape]
    return helper.make_tensor_value_info(name, tensor_type(val.dtype), dims)


class GraphBuilder:
    """Emits ONNX nodes and constants; maps each lowered fx node to its ONNX value name(s)."""

    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._arrays: dict[str, np.ndarray] = {}  # constant's value name (initializer or Reshape of one) -> its value
        self._values: dict[torch.fx.Node, str | list[str]] = {}
        self._cache: dict[tuple, str] = {}  # shared small constants and casts
        self._taken: set[str] = set()
        self._outputs: set[str] = set()  # the graph's output names

    def fresh(self, hint: str) -> str:
        """``hint`` itself, or ``hint_N`` if that name is already used."""
        name, n = hint, 0
        while name in self._taken:
            n += 1
            name = f"{hint}_{n}"
        self._taken.add(name)
        return name

    def bind(self, node: torch.fx.Node, value: str | list[str]) -> None:
        self._values[node] = value

    def value(self, node: torch.fx.Node) -> str | list[str]:
        return self._values[node]

    def has_value(self, node: torch.fx.Node) -> bool:
        return node in self._values

    def computes(self, node: torch.fx.Node) -> bool:
        """Whether a node of this graph computes ``node``'s value (not an input or a constant)."""
        name = self._values.get(node)
        return isinstance(name, str) and any(name in n.output for n in self.nodes)

    def constant(self, array, hint: str = "const") -> str:
        """The value holding ``array``: an initializer, shared by equal constants."""
        array = np.asarray(array, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        digest = hashlib.blake2b(array.reshape(-1).view(np.uint8), digest_size=16).digest()
        contents = ("constant", array.dtype.str, digest)
        key = contents + (array.shape,)
        if key not in self._cache:
            same_bytes = self._cache.get(contents) if array.size > _RESHAPED_CONSTANT_SIZE else None
            self._cache[key] = (
                self._initializer(array, hint)
                if same_bytes is None
                else self.emit("Reshape", [same_bytes, self.int64s(array.shape)])
            )
            self._cache.setdefault(contents, self._cache[key])
            self._arrays[self._cache[key]] = array
        return self._cache[key]

    def _initializer(self, array: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def constant_array(self, node: torch.fx.Node) -> np.ndarray:
        """The value of a constant the graph binds ``node`` to (a parameter, buffer or lifted constant)."""
        name = self._values.get(node)
        if not isinstance(name, str) or name not in self._arrays:
            raise ExportError(f"{node.name} is not one of the lowered graph's constants")
        return self._arrays[name]

    def constant_of(self, name: str) -> np.ndarray | None:
        """The value of the constant named ``name``; None for a computed value."""
        return self._arrays.get(name)

    def int64s(self, values) -> str:
        """A 1-D int64 constant (shapes, axes, pads)."""
        return self.constant(np.asarray(values, dtype=np.int64).reshape(-1))

    def scalar(self, value, dtype: torch.dtype) -> str:
        """A 0-d constant of ``dtype``."""
        return self.constant(np.asarray(value, dtype=numpy_dtype(dtype)))

    def tensor(self, arg, dtype: torch.dtype | None = None) -> str:
        """The ONNX value of an fx argument (a node or a Python number), converted to ``dtype``."""
        if not isinstance(arg, torch.fx.Node):
            return self.scalar(arg, dtype)
        name = self._values[arg]
        if not isinstance(name, str):
            raise ExportError(f"{arg.name} is a list of values, not one tensor")
        return name if dtype is None or dtype == arg.meta["val"].dtype else self.cast(name, dtype)

    def cast(self, name: str, dtype: torch.dtype) -> str:
        """``name`` converted to ``dtype``: a new constant for a constant, otherwise a Cast node."""
        key = ("cast", name, dtype)
        if key not in self._cache:
            if name in self._arrays:
                self._cache[key] = self.constant(self._arrays[name].astype(numpy_dtype(dtype)))
            else:
                self._cache[key] = self.emit("Cast", [name], to=tensor_type(dtype))
        return self._cache[key]

    def used_initializers(self) -> list[onnx.TensorProto]:
        """The initializers some node reads (a constant replaced by its cast copy may not be)."""
        read = {name for node in self.nodes for name in node.input}
        return [t for t in self.initializers if t.name in read]

    def drop_unread(self) -> None:
        """Remove the nodes no other node reads (a translation may supersede earlier ones); call it
        after the graph's outputs are added."""
        while True:
            read = self._outputs.union(*(node.input for node in self.nodes))
            kept = [n for n in self.nodes if any(out in read for out in n.output)]
            if len(kept) == len(self.nodes):
                return
            self.nodes[:] = kept

    def name_outputs_at_their_nodes(self) -> None:
        """Drop the Identity of each output whose value a node of the graph computes and no other
        output reads: that node writes the output's name itself (one kernel call fewer)."""
        produced = {out for node in self.nodes for out in node.output}
        identities = [n for n in self.nodes if n.op_type == "Identity" and n.output[0] in self._outputs]
        sources = [n.input[0] for n in identities]
        rename = {
            source: node.output[0]
            for node, source in zip(identities, sources)
            if source in produced and source not in self._outputs and sources.count(source) == 1
        }
        for node in self.nodes:
            for values in (node.input, node.output):
                for i, value in enumerate(values):
                    values[i] = rename.get(value, value)
        self.nodes[:] = [n for n in self.nodes if not (n.op_type == "Identity" and n.input[0] == n.output[0])]

    def output(self, value: str, name: str) -> None:
        """Expose ``value`` as the graph output ``name`` (reserved with `fresh` beforehand)."""
        self.nodes.append(helper.make_node("Identity", [value], [name], name=name))
        self._outputs.add(name)

    def emit(self, op_type: str, inputs: list[str], **attributes) -> str:
        """One node with a single output; attributes that are None are left out."""
        return self.emit_multi(op_type, inputs, 1, **attributes)[0]

    def emit_multi(self, op_type: str, inputs: list[str], outputs: int, **attributes) -> list[str]:
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        attributes = {k: v for k, v in attributes.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, inputs, names, name=names[0], **attributes))
        return names
