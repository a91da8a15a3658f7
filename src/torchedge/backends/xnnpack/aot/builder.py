"""An `XNNGraph` under construction: values, constants and nodes, then the payload bytes.

Constants live in the program's named data, as ExecuTorch's own lowering writes them: each
`ConstantDataOffset` names its bytes by their SHA-256 (`named_data`, which ``preprocess`` hands
on as its ``data_store_output``). Not in the payload: ExecuTorch's runtime frees a delegate's
payload once XNNPACK is set up, and XNNPACK keeps pointers to some constant operands
(element-wise ones), which must stay in memory the program keeps. Identical constants are
stored once. Entry 0 of ``constant_data`` is the empty entry that means "not a constant", as in
ExecuTorch's payloads.
"""

from __future__ import annotations

import hashlib

import numpy as np

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.header import join_payload
from torchedge.backends.xnnpack.payload_tables import encode_graph

__all__ = ["GraphBuilder", "NODE_CLASSES", "INVALID", "FLAG_TRANSPOSE_WEIGHTS", "FLAG_KEEP_DIMS"]

INVALID = s.INVALID_VALUE_ID
FLAG_TRANSPOSE_WEIGHTS = 0x1  # XNN_FLAG_TRANSPOSE_WEIGHTS
FLAG_KEEP_DIMS = 0x40  # XNN_FLAG_KEEP_DIMS
_NAMED = 2**64 - 1  # the offset of a constant given by its named key
NODE_CLASSES = {cls.__name__: cls for cls in s.NODE_KINDS}


class GraphBuilder:
    """Appends values and nodes to an `XNNGraph`; `payload()` is the delegate's bytes."""

    def __init__(self) -> None:
        self.graph = s.XNNGraph(version="0", constant_data=[_entry(0, 0)])
        self.named_data: dict[str, bytes] = {}  # key -> bytes of every constant
        self._stored: dict[str, int] = {}  # key -> constant_data index
        self.float_datatype = s.XNNDatatype.xnn_datatype_fp32  # of float values by default

    def value(self, dims, data: np.ndarray | None = None, datatype: s.XNNDatatype | None = None) -> int:
        """A new float value of shape ``dims`` (the constant ``data`` when given) of ``datatype``
        (`float_datatype` by default); its id."""
        value_id = len(self.graph.xvalues)
        dims = [int(d) for d in dims]
        datatype = self.float_datatype if datatype is None else datatype
        dtype = np.float16 if datatype == s.XNNDatatype.xnn_datatype_fp16 else np.float32
        buffer_idx = 0 if data is None else self.store(np.ascontiguousarray(data, dtype=dtype).tobytes())
        tensor = s.XNNTensorValue(
            datatype=datatype,
            num_dims=len(dims),
            dims=dims,
            constant_buffer_idx=buffer_idx,
            external_id=INVALID,
            flags=0,
            id_out=value_id,
        )
        self.graph.xvalues.append(s.XValue(tensor))
        return value_id

    def quantized_value(self, dims, datatype: s.XNNDatatype, params, data: bytes | None = None) -> int:
        """A new quantized value (``params``: PerTensorQuant, PerChannelQuant, PerTokenDynamicQuant,
        PerChannelGroupQuant) of ``datatype``; ``data``: the constant's raw bytes when given."""
        value_id = len(self.graph.xvalues)
        dims = [int(d) for d in dims]
        tensor = s.XNNTensorValue(
            datatype=datatype,
            num_dims=len(dims),
            dims=dims,
            constant_buffer_idx=0 if data is None else self.store(data),
            external_id=INVALID,
            flags=0,
            id_out=value_id,
        )
        self.graph.xvalues.append(s.XValue(s.XNNQuantizedTensorValue(tensor, params)))
        return value_id

    def like(self, value_id: int, dims) -> int:
        """A new value of ``value_id``'s datatype and quantization, of shape ``dims``."""
        source = self.graph.xvalues[value_id].xvalue_union
        if isinstance(source, s.XNNQuantizedTensorValue):
            return self.quantized_value(dims, source.tensor_value.datatype, source.quant_params)
        return self.value(dims, datatype=source.datatype)

    def quantization(self, value_id: int):
        """The quantization parameters of ``value_id`` (None for a float value)."""
        source = self.graph.xvalues[value_id].xvalue_union
        return source.quant_params if isinstance(source, s.XNNQuantizedTensorValue) else None

    def tensor(self, value_id: int) -> s.XNNTensorValue:
        tensor = self.graph.xvalues[value_id].xvalue_union
        if isinstance(tensor, s.XNNQuantizedTensorValue):
            tensor = tensor.tensor_value
        assert isinstance(tensor, s.XNNTensorValue)
        return tensor

    def mark_external(self, value_id: int, external_id: int, output: bool) -> None:
        """Makes a value the delegate's external input or output number ``external_id``."""
        tensor = self.tensor(value_id)
        tensor.external_id = external_id
        tensor.flags |= s.VALUE_FLAG_EXTERNAL_OUTPUT if output else s.VALUE_FLAG_EXTERNAL_INPUT
        (self.graph.output_ids if output else self.graph.input_ids).append(value_id)
        self.graph.num_externs += 1

    def node(self, kind: str, output_min_max: tuple[float, float] | None = None, **fields) -> s.XNode:
        """Appends a node of ``kind`` (an XNodeUnion member name) with ``fields``; returns it."""
        bounds = None if output_min_max is None else s.OutputMinMax(*map(float, output_min_max))
        xnode = s.XNode(NODE_CLASSES[kind](**fields), 0, bounds)
        self.graph.xnodes.append(xnode)
        return xnode

    def store(self, data: bytes) -> int:
        """The constant data index of ``data`` (stored once, by its SHA-256, in `named_data`)."""
        key = hashlib.sha256(data).hexdigest()
        index = self._stored.get(key)
        if index is None:
            index = len(self.graph.constant_data)
            self.graph.constant_data.append(s.ConstantDataOffset(offset=_NAMED, size=len(data), named_key=key))
            self.named_data[key] = bytes(data)
            self._stored[key] = index
        return index

    def payload(self) -> bytes:
        """The ``XH00`` header and the ``XN01`` flatbuffer (the constants are in `named_data`)."""
        return join_payload(encode_graph(self.graph), b"")


def _entry(offset: int, size: int) -> s.ConstantDataOffset:
    # No named key at all (an empty string would still be a present field, which ExecuTorch
    # reads as a key to look up in the named data).
    return s.ConstantDataOffset(offset=offset, size=size, named_key=None)
