"""The wire description of ExecuTorch's XNNPACK ``schema.fbs``, for torchedge's flatbuffer codec.

Fields are listed in declaration order (deprecated ones too: they keep their slots). Struct
formats: ``h`` short, ``i`` int, ``I`` uint, ``Q`` uint64, ``f`` float, ``H`` ushort.
`decode_graph` reads a payload's flatbuffer into `schema.XNNGraph`.
"""

from __future__ import annotations

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.header import FLATBUFFER_IDENTIFIER
from torchedge.errors import InvalidProgramError
from torchedge.serialize.flatbuffer import decode, encode
from torchedge.serialize.flatbuffer_fields import (
    Bytes,
    Scalar,
    ScalarVector,
    String,
    Table,
    TableRef,
    TableVector,
    Union,
)

__all__ = ["XNN_GRAPH", "decode_graph", "encode_graph"]


def _uints(cls: type, names: str) -> Table:
    """A table whose fields are all uint, named in order by ``names``."""
    return Table(cls, [Scalar(name, "I") for name in names.split()])


_BUFFER = Table(s.Buffer, [Bytes("storage", alignment=16)])
_QUANT_PARAMS = [
    Table(
        s.PerChannelQuant,
        [
            ScalarVector("scale", "f"),
            Scalar("channel_dim", "i"),
            Scalar("scale_buffer_idx", "I"),
            Scalar("num_scales", "I"),
        ],
    ),
    Table(s.PerTensorQuant, [Scalar("scale", "f"), Scalar("zero_point", "i")]),
    Table(s.PerTokenDynamicQuant, [Scalar("num_nonbatch_dims", "i")]),
    Table(
        s.PerChannelGroupQuant,
        [
            ScalarVector("scale", "f"),
            Scalar("channel_dim", "i"),
            Scalar("group_size", "i"),
            ScalarVector("scale_bf16", "H"),
            Scalar("scale_buffer_idx", "I"),
            Scalar("num_scales", "I"),
        ],
    ),
]
_TENSOR_VALUE = Table(
    s.XNNTensorValue,
    [
        Scalar("datatype", "h", enum=s.XNNDatatype),
        Scalar("num_dims", "I"),
        ScalarVector("dims", "I"),
        Scalar("constant_buffer_idx", "I"),
        Scalar("external_id", "I"),
        Scalar("flags", "I"),
        Scalar("id_out", "I"),
    ],
)
_QUANTIZED_TENSOR_VALUE = Table(
    s.XNNQuantizedTensorValue, [TableRef("tensor_value", _TENSOR_VALUE), Union("quant_params", _QUANT_PARAMS)]
)
_XVALUE = Table(s.XValue, [Union("xvalue_union", [_TENSOR_VALUE, _QUANTIZED_TENSOR_VALUE])])
_OUTPUT_MIN_MAX = Table(s.OutputMinMax, [Scalar("output_min", "f"), Scalar("output_max", "f")])

_CONV = (
    "padding_top padding_right padding_bottom padding_left kernel_height kernel_width subsampling_height "
    "subsampling_width dilation_height dilation_width group_input_channels group_output_channels groups "
    "adjustment_height adjustment_width input1_id filter_id bias_id output_id flags"
)
_POOLING = (
    "padding_top padding_right padding_bottom padding_left pooling_height pooling_width stride_height "
    "stride_width dilation_height dilation_width input_id output_id flags"
)
_ARGMAX_POOLING = (
    "padding_top padding_right padding_bottom padding_left pooling_height pooling_width "
    "input_id output_value_id output_index_id flags"
)


def _node_table(cls: type) -> Table:
    """The wire description of node kind ``cls`` (a `schema.NODE_KINDS` class)."""
    base = cls.__mro__[0] if cls.__name__ in _BY_TABLE else cls.__mro__[1]
    return _BY_TABLE[base.__name__](cls)


def _with_float(first: str, rest: str):
    return lambda cls: Table(cls, [Scalar(first, "f")] + [Scalar(name, "I") for name in rest.split()])


_BY_TABLE = {
    "XNNNode2x1": lambda cls: _uints(cls, "input1_id input2_id output_id flags"),
    "XNNNode1x1": lambda cls: _uints(cls, "input_id output_id flags"),
    "XNNCat": lambda cls: _uints(cls, "axis input1_id input2_id input3_id input4_id output_id flags input5_id"),
    "XNNNodeConv": lambda cls: _uints(cls, _CONV),
    "XNNPooling2D": lambda cls: _uints(cls, _POOLING),
    "XNNFullyConnected": lambda cls: _uints(cls, "input1_id filter_id bias_id output_id flags"),
    "XNNStaticResizeBilinear2D": lambda cls: _uints(cls, "new_height new_width input_id output_id flags"),
    "XNNScaledDotProductAttention": lambda cls: _uints(
        cls, "query_id key_id value_id scale_id mask_id output_id flags"
    ),
    "XNNArgMaxPooling2d": lambda cls: _uints(cls, _ARGMAX_POOLING),
    "XNNELU": _with_float("alpha", "input_id output_id flags"),
    "XNNLeakyReLU": _with_float("negative_slope", "input_id output_id flags"),
    "XNNStaticTranspose": lambda cls: Table(
        cls,
        [Scalar("num_dims", "I"), ScalarVector("perm", "I")]
        + [Scalar(n, "I") for n in ("input_id", "output_id", "flags")],
    ),
    "XNNStaticReshape": lambda cls: Table(
        cls,
        [Scalar("num_dims", "I"), ScalarVector("new_shape", "I")]
        + [Scalar(n, "I") for n in ("input_id", "output_id", "flags")],
    ),
    "XNNStaticSlice": lambda cls: Table(
        cls,
        [Scalar("num_dims", "I"), ScalarVector("offsets", "I"), ScalarVector("sizes", "I")]
        + [Scalar(n, "I") for n in ("input_id", "output_id", "flags")],
    ),
    "XNNStaticConstantPad": lambda cls: Table(
        cls,
        [ScalarVector("pre_paddings", "I"), ScalarVector("post_paddings", "I"), Scalar("padding_value", "f")]
        + [Scalar(n, "I") for n in ("input_id", "output_id", "flags")],
    ),
}

_XNODE = Table(
    s.XNode,
    [
        Union("xnode_union", [_node_table(cls) for cls in s.NODE_KINDS]),
        Scalar("debug_handle", "I"),
        TableRef("output_min_max", _OUTPUT_MIN_MAX),
    ],
)
_CONSTANT_DATA_OFFSET = Table(s.ConstantDataOffset, [Scalar("offset", "Q"), Scalar("size", "Q"), String("named_key")])

XNN_GRAPH = Table(
    s.XNNGraph,
    [
        String("version"),
        TableVector("xnodes", _XNODE),
        TableVector("xvalues", _XVALUE),
        Scalar("num_externs", "I"),
        ScalarVector("input_ids", "I"),
        ScalarVector("output_ids", "I"),
        TableVector("constant_buffer", _BUFFER),
        ScalarVector("mem_buffer_sizes", "I"),
        TableVector("constant_data", _CONSTANT_DATA_OFFSET),
    ],
)


def decode_graph(flatbuffer: memoryview) -> s.XNNGraph:
    """The `XNNGraph` in ``flatbuffer`` (identifier ``XN01``); `InvalidProgramError` if malformed."""
    if len(flatbuffer) < 8 or bytes(flatbuffer[4:8]) != FLATBUFFER_IDENTIFIER:
        raise InvalidProgramError(f"XNNPACK payload: the flatbuffer lacks the identifier {FLATBUFFER_IDENTIFIER!r}")
    return decode(flatbuffer, XNN_GRAPH)


def encode_graph(graph: s.XNNGraph) -> bytes:
    """``graph`` as a flatbuffer with identifier ``XN01`` (what flatc writes from ExecuTorch's JSON)."""
    return encode(graph, XNN_GRAPH, FLATBUFFER_IDENTIFIER)
