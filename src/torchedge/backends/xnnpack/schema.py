"""The XNNPACK delegate graph (ExecuTorch's ``schema.fbs``) as plain dataclasses.

Names and field order are those of the schema. Union members that share one table type in the
schema (``XNNAdd: _XNNNode2x1``) are distinct subclasses here, so a decoded node's class names
its kind. Defaults are the schema's (absent scalars read as zero).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

__all__ = [
    "XNNDatatype",
    "INVALID_VALUE_ID",
    "VALUE_FLAG_EXTERNAL_INPUT",
    "VALUE_FLAG_EXTERNAL_OUTPUT",
    "Buffer",
    "PerChannelGroupQuant",
    "PerChannelQuant",
    "PerTokenDynamicQuant",
    "PerTensorQuant",
    "XNNTensorValue",
    "XNNQuantizedTensorValue",
    "OutputMinMax",
    "XNode",
    "XValue",
    "XNNStaticTranspose",
    "XNNStaticResizeBilinear2D",
    "XNNStaticConstantPad",
    "XNNNode2x1",
    "XNNNode1x1",
    "XNNCat",
    "XNNELU",
    "XNNFullyConnected",
    "XNNNodeConv",
    "XNNPooling2D",
    "XNNStaticReshape",
    "XNNStaticSlice",
    "XNNScaledDotProductAttention",
    "XNNArgMaxPooling2d",
    "XNNLeakyReLU",
    "ConstantDataOffset",
    "XNNGraph",
    "NODE_KINDS",
]

INVALID_VALUE_ID = 0xFFFFFFFF  # XNN_INVALID_VALUE_ID: no external id
VALUE_FLAG_EXTERNAL_INPUT = 0x1
VALUE_FLAG_EXTERNAL_OUTPUT = 0x2


class XNNDatatype(IntEnum):
    xnn_datatype_invalid = 0
    xnn_datatype_fp32 = 1
    xnn_datatype_fp16 = 2
    xnn_datatype_qint8 = 3
    xnn_datatype_quint8 = 4
    xnn_datatype_qint32 = 5
    xnn_datatype_qcint8 = 6
    xnn_datatype_qcint32 = 7
    xnn_datatype_qcint4 = 8
    xnn_datatype_qdint8 = 9
    xnn_datatype_qbint4 = 10
    xnn_datatype_qpint8 = 11
    xnn_datatype_int32 = 12
    xnn_datatype_pfp32 = 13
    xnn_datatype_bf16 = 14


@dataclass
class Buffer:  # deprecated: constant data no longer lives in the flatbuffer
    storage: memoryview | None = None


@dataclass
class PerChannelGroupQuant:
    scale: list[float] = field(default_factory=list)
    channel_dim: int = 0
    group_size: int = 0
    scale_bf16: list[int] = field(default_factory=list)  # deprecated
    scale_buffer_idx: int = 0
    num_scales: int = 0


@dataclass
class PerChannelQuant:
    scale: list[float] = field(default_factory=list)
    channel_dim: int = 0
    scale_buffer_idx: int = 0
    num_scales: int = 0


@dataclass
class PerTokenDynamicQuant:
    num_nonbatch_dims: int = 0


@dataclass
class PerTensorQuant:
    scale: float = 0.0
    zero_point: int = 0


@dataclass
class XNNTensorValue:
    datatype: XNNDatatype = XNNDatatype.xnn_datatype_invalid
    num_dims: int = 0
    dims: list[int] = field(default_factory=list)
    constant_buffer_idx: int = 0  # 0: not a constant
    external_id: int = 0
    flags: int = 0
    id_out: int = 0


@dataclass
class XNNQuantizedTensorValue:
    tensor_value: XNNTensorValue | None = None
    quant_params: object = None  # PerChannelQuant | PerTensorQuant | PerTokenDynamicQuant | PerChannelGroupQuant


@dataclass
class OutputMinMax:
    output_min: float = 0.0
    output_max: float = 0.0


@dataclass
class XNode:
    xnode_union: object = None  # one of NODE_KINDS
    debug_handle: int = 0
    output_min_max: OutputMinMax | None = None


@dataclass
class XValue:
    xvalue_union: object = None  # XNNTensorValue | XNNQuantizedTensorValue


# ----------------------------------------------------------------------------
# Node tables


@dataclass
class XNNStaticTranspose:
    num_dims: int = 0
    perm: list[int] = field(default_factory=list)
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNStaticResizeBilinear2D:
    new_height: int = 0
    new_width: int = 0
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNStaticConstantPad:
    pre_paddings: list[int] = field(default_factory=list)
    post_paddings: list[int] = field(default_factory=list)
    padding_value: float = 0.0
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNNode2x1:  # _XNNNode2x1
    input1_id: int = 0
    input2_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNNode1x1:  # _XNNNode1x1
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNCat:  # _XNNCat
    axis: int = 0
    input1_id: int = 0
    input2_id: int = 0
    input3_id: int = 0
    input4_id: int = 0
    output_id: int = 0
    flags: int = 0
    input5_id: int = 0


@dataclass
class XNNELU:
    alpha: float = 0.0
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNFullyConnected:
    input1_id: int = 0
    filter_id: int = 0
    bias_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNNodeConv:  # _XNNNodeConv
    padding_top: int = 0
    padding_right: int = 0
    padding_bottom: int = 0
    padding_left: int = 0
    kernel_height: int = 0
    kernel_width: int = 0
    subsampling_height: int = 0
    subsampling_width: int = 0
    dilation_height: int = 0
    dilation_width: int = 0
    group_input_channels: int = 0
    group_output_channels: int = 0
    groups: int = 0
    adjustment_height: int = 0
    adjustment_width: int = 0
    input1_id: int = 0
    filter_id: int = 0
    bias_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNPooling2D:  # _XNNPooling2D
    padding_top: int = 0
    padding_right: int = 0
    padding_bottom: int = 0
    padding_left: int = 0
    pooling_height: int = 0
    pooling_width: int = 0
    stride_height: int = 0
    stride_width: int = 0
    dilation_height: int = 0
    dilation_width: int = 0
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNStaticReshape:
    num_dims: int = 0
    new_shape: list[int] = field(default_factory=list)
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNStaticSlice:
    num_dims: int = 0
    offsets: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNScaledDotProductAttention:
    query_id: int = 0
    key_id: int = 0
    value_id: int = 0
    scale_id: int = 0
    mask_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class XNNArgMaxPooling2d:
    padding_top: int = 0
    padding_right: int = 0
    padding_bottom: int = 0
    padding_left: int = 0
    pooling_height: int = 0
    pooling_width: int = 0
    input_id: int = 0
    output_value_id: int = 0
    output_index_id: int = 0
    flags: int = 0


@dataclass
class XNNLeakyReLU:
    negative_slope: float = 0.0
    input_id: int = 0
    output_id: int = 0
    flags: int = 0


@dataclass
class ConstantDataOffset:
    offset: int = 0  # UINT64_MAX when named_key is set
    size: int = 0
    named_key: str = ""


@dataclass
class XNNGraph:
    version: str = ""
    xnodes: list[XNode] = field(default_factory=list)
    xvalues: list[XValue] = field(default_factory=list)
    num_externs: int = 0
    input_ids: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    constant_buffer: list[Buffer] = field(default_factory=list)  # deprecated
    mem_buffer_sizes: list[int] = field(default_factory=list)  # deprecated
    constant_data: list[ConstantDataOffset] = field(default_factory=list)


# XNodeUnion members in tag order: (name, table type). A member sharing a table type gets its own
# subclass named after it, so the decoded object says which kind of node it is.
_UNION_MEMBERS = [
    ("XNNAdd", XNNNode2x1),
    ("XNNFullyConnected", XNNFullyConnected),
    ("XNNSoftmax", XNNNode1x1),
    ("XNNSigmoid", XNNNode1x1),
    ("XNNStaticTranspose", XNNStaticTranspose),
    ("XNNClamp", XNNNode1x1),
    ("XNNConv2d", XNNNodeConv),
    ("XNNDiv", XNNNode2x1),
    ("XNNStaticResizeBilinear2D", XNNStaticResizeBilinear2D),
    ("XNNStaticConstantPad", XNNStaticConstantPad),
    ("XNNAvgPooling2d", XNNPooling2D),
    ("XNNMinimum", XNNNode2x1),
    ("XNNDepthwiseConv2d", XNNNodeConv),
    ("XNNMaxPooling2d", XNNPooling2D),
    ("XNNMultiply", XNNNode2x1),
    ("XNNSubtract", XNNNode2x1),
    ("XNNFloor", XNNNode1x1),
    ("XNNConvert", XNNNode1x1),
    ("XNNGlobalAvgPooling2d", XNNNode1x1),
    ("XNNStaticReshape", XNNStaticReshape),
    ("XNNArgMaxPooling2d", XNNArgMaxPooling2d),
    ("XNNSquareRoot", XNNNode1x1),
    ("XNNCeiling", XNNNode1x1),
    ("XNNHardswish", XNNNode1x1),
    ("XNNLeakyReLU", XNNLeakyReLU),
    ("XNNMaximum", XNNNode2x1),
    ("XNNNegate", XNNNode1x1),
    ("XNNSquare", XNNNode1x1),
    ("XNNELU", XNNELU),
    ("XNNAbs", XNNNode1x1),
    ("XNNPReLU", XNNNode2x1),
    ("XNNConcatenate2", XNNCat),
    ("XNNConcatenate3", XNNCat),
    ("XNNConcatenate4", XNNCat),
    ("XNNStaticSlice", XNNStaticSlice),
    ("XNNScaledDotProductAttention", XNNScaledDotProductAttention),
    ("XNNBatchMatrixMultiply", XNNNode2x1),
    ("XNNConcatenate5", XNNCat),
    ("XNNConvTranspose2d", XNNNodeConv),
    ("XNNReciprocalSquareRoot", XNNNode1x1),
    ("XNNLog", XNNNode1x1),
    ("XNNGelu", XNNNode1x1),
    ("XNNTanh", XNNNode1x1),
    ("XNNExp", XNNNode1x1),
    ("XNNSin", XNNNode1x1),
    ("XNNCopy", XNNNode1x1),
    ("XNNCos", XNNNode1x1),
]


def _kind(name: str, table: type) -> type:
    """The class of union member ``name``: the table itself when it is named so, else a subclass."""
    if table.__name__ == name:
        return table
    return type(name, (table,), {"__module__": __name__, "__doc__": f"{name}: a {table.__name__} node."})


# Node kind classes in XNodeUnion tag order (tag = index + 1).
NODE_KINDS: list[type] = [_kind(name, table) for name, table in _UNION_MEMBERS]
