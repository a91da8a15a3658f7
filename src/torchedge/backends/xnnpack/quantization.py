"""Quantized XNNPACK values: their quantization parameters, storage and the arithmetic XNNPACK
does on them (quantize, dequantize, per-row dynamic quantization, requantization).

Storage: ``qint8``/``qcint8``/``qdint8`` are int8, ``quint8`` uint8, ``qint32``/``qcint32``
int32. Per-channel scales sit in the constant data (``scale_buffer_idx``, float32) or inline
(``scale``). A ``qdint8`` value (``PerTokenDynamicQuant``) gets its parameters at run time, per
row (the dims before the last ``num_nonbatch_dims``), as XNNPACK's ``f32 -> qd8`` convert
computes them. The arithmetic is XNNPACK's in float32: quantization multiplies by the
reciprocal scale and rounds to nearest even; requantization of an int32 accumulator multiplies
it (as float) by ``input_scale * kernel_scale / output_scale`` and rounds, clamped to the
output's range. NumPy only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from torchedge.backends.xnnpack import schema as s
from torchedge.errors import InvalidProgramError

__all__ = [
    "QUANTIZED_DTYPES",
    "Quant",
    "decode_quantized",
    "quantize",
    "dequantize",
    "requantize",
    "clamp_step",
    "q8_multiplier",
]

D = s.XNNDatatype
QUANTIZED_DTYPES = {
    D.xnn_datatype_qint8: np.dtype(np.int8),
    D.xnn_datatype_quint8: np.dtype(np.uint8),
    D.xnn_datatype_qcint8: np.dtype(np.int8),
    D.xnn_datatype_qdint8: np.dtype(np.int8),
    D.xnn_datatype_qint32: np.dtype(np.int32),
    D.xnn_datatype_qcint32: np.dtype(np.int32),
    D.xnn_datatype_qcint4: np.dtype(np.int8),  # held unpacked: two 4-bit values a byte in the payload
    D.xnn_datatype_qbint4: np.dtype(np.int8),
}
_PACKED = (D.xnn_datatype_qcint4, D.xnn_datatype_qbint4)
_PARAMS = {
    D.xnn_datatype_qint8: s.PerTensorQuant,
    D.xnn_datatype_quint8: s.PerTensorQuant,
    D.xnn_datatype_qint32: s.PerTensorQuant,
    D.xnn_datatype_qcint8: s.PerChannelQuant,
    D.xnn_datatype_qcint32: s.PerChannelQuant,
    D.xnn_datatype_qdint8: s.PerTokenDynamicQuant,
    D.xnn_datatype_qcint4: s.PerChannelQuant,
    D.xnn_datatype_qbint4: s.PerChannelGroupQuant,
}
_F32 = np.float32


@dataclass
class Quant:
    """How a value's integers map to reals: ``(q - zero_point) * scale``."""

    datatype: s.XNNDatatype
    scale: np.ndarray  # float32: one value (per tensor) or one per channel
    zero_point: int = 0
    channel_dim: int | None = None  # per channel: the dim ``scale`` runs along
    rows: int = 0  # dynamic: how many rows get their own parameters
    row_scale: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # dynamic, per row (inv_scale)
    row_zero_point: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # dynamic, per row
    group_size: int = 0  # blockwise (qbint4): ``scale`` is [channels, blocks] along the last dim

    @property
    def packed(self) -> bool:
        """4-bit values, two a byte (low nibble first), stored as ``value + 8``."""
        return self.datatype in _PACKED

    def unpack(self, raw: np.ndarray, columns: int) -> np.ndarray:
        """The int8 values of packed 4-bit rows ``raw`` ([rows, ceil(columns / 2)] uint8)."""
        values = np.empty((raw.shape[0], raw.shape[1] * 2), np.int8)
        values[:, 0::2] = raw & 0xF
        values[:, 1::2] = raw >> 4
        values -= 8
        return values[:, :columns]

    @property
    def qmin(self) -> int:
        return -8 if self.packed else int(np.iinfo(QUANTIZED_DTYPES[self.datatype]).min)

    @property
    def qmax(self) -> int:
        return 7 if self.packed else int(np.iinfo(QUANTIZED_DTYPES[self.datatype]).max)

    @property
    def kind(self) -> str:
        """The schema's name for these parameters."""
        if self.dynamic:
            return "PerTokenDynamicQuant"
        if self.group_size:
            return "PerChannelGroupQuant"
        return "PerTensorQuant" if self.channel_dim is None else "PerChannelQuant"

    @property
    def dynamic(self) -> bool:
        return self.datatype == D.xnn_datatype_qdint8

    def same_as(self, other: Quant | None) -> bool:
        return (
            other is not None
            and self.datatype == other.datatype
            and self.zero_point == other.zero_point
            and np.array_equal(self.scale, other.scale)
        )


def decode_quantized(index: int, value: s.XNNQuantizedTensorValue, read_scales):
    """(tensor value, storage dtype, `Quant`) of a quantized value; `InvalidProgramError` for the
    datatypes and parameter kinds torchedge does not compute with. ``read_scales(buffer_index,
    count, dtype)`` reads scales from the constant data (bfloat16 bits, as uint16, for qbint4)."""
    base, params = value.tensor_value, value.quant_params
    if base is None:
        raise InvalidProgramError(f"XNNPACK value {index} is quantized but has no tensor value")
    kind = type(params).__name__
    where = f"XNNPACK value {index} ({base.datatype.name}, {kind})"
    expected = _PARAMS.get(base.datatype)
    if expected is None:
        supported = ", ".join(d.name for d in QUANTIZED_DTYPES)
        raise InvalidProgramError(
            f"{where} is quantized: {base.datatype.name} is not supported (supported: {supported})"
        )
    if not isinstance(params, expected):
        raise InvalidProgramError(f"{where}: a {base.datatype.name} value takes {expected.__name__} parameters")
    if isinstance(params, s.PerTensorQuant):
        if (
            base.datatype != D.xnn_datatype_qint32
            and not np.iinfo(QUANTIZED_DTYPES[base.datatype]).min
            <= (params.zero_point)
            <= np.iinfo(QUANTIZED_DTYPES[base.datatype]).max
        ):
            raise InvalidProgramError(f"{where}: zero point {params.zero_point} is out of range")
        quant = Quant(base.datatype, np.array([params.scale], _F32), int(params.zero_point))
    elif isinstance(params, s.PerChannelQuant):
        if params.channel_dim >= len(base.dims):
            raise InvalidProgramError(f"{where}: channel_dim {params.channel_dim} is past its {len(base.dims)} dims")
        channels = base.dims[params.channel_dim]
        scale = np.asarray(params.scale, _F32) if params.scale else read_scales(params.scale_buffer_idx, channels)
        if scale.shape != (channels,):
            raise InvalidProgramError(f"{where}: {scale.size} scales for {channels} channels")
        quant = Quant(base.datatype, scale, 0, params.channel_dim)
    elif isinstance(params, s.PerChannelGroupQuant):
        quant = _blockwise(where, base, params, read_scales)
    else:
        nonbatch = params.num_nonbatch_dims
        if not 1 <= nonbatch <= len(base.dims):
            raise InvalidProgramError(f"{where}: num_nonbatch_dims {nonbatch} does not fit {len(base.dims)} dims")
        rows = int(np.prod(base.dims[: len(base.dims) - nonbatch], dtype=np.int64))
        quant = Quant(base.datatype, np.ones(1, _F32), 0, None, rows, np.ones(rows, _F32), np.zeros(rows, np.int32))
    if not np.all(np.isfinite(quant.scale) & (quant.scale > 0)):
        raise InvalidProgramError(f"{where}: scales must be positive and finite")
    return base, QUANTIZED_DTYPES[base.datatype], quant


def _blockwise(where: str, base: s.XNNTensorValue, params: s.PerChannelGroupQuant, read_scales) -> Quant:
    """qbint4 filters: [channels, K] with one bfloat16 scale per channel and block of ``group_size``."""
    if len(base.dims) != 2 or params.channel_dim != 0:
        raise InvalidProgramError(f"{where}: blockwise values must be 2-D with channel_dim 0")
    channels, columns = base.dims
    size = params.group_size
    if size <= 0 or columns % size:
        raise InvalidProgramError(f"{where}: group_size {size} does not divide the {columns} columns")
    count = channels * (columns // size)
    if params.scale:
        scale = np.asarray(params.scale, _F32)
    elif params.scale_bf16:
        scale = _bf16(np.asarray(params.scale_bf16, np.uint16))
    else:
        scale = _bf16(read_scales(params.scale_buffer_idx, count, np.dtype(np.uint16)))
    if scale.size != count:
        raise InvalidProgramError(f"{where}: {scale.size} scales for {channels} channels of {columns // size} blocks")
    return Quant(base.datatype, scale.reshape(channels, -1), 0, 0, group_size=size)


def _bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(_F32)


def quantize(x: np.ndarray, quant: Quant, out: np.ndarray) -> None:
    """float32 -> int (XNNPACK's f32 -> qs8 convert): ``x * (1 / scale)``, rounded to nearest
    even, plus the zero point, saturated."""
    if quant.dynamic:
        _quantize_rows(x, quant, out)
        return
    inverse = _F32(1) / quant.scale[0]
    _round_into(np.multiply(x, inverse, dtype=_F32), quant.zero_point, quant.qmin, quant.qmax, out)


def _round_into(scaled: np.ndarray, zero_point, qmin: int, qmax: int, out: np.ndarray) -> None:
    """``out = clamp(rint(scaled) + zero_point)`` (clamping first, as XNNPACK does, is the same)."""
    np.clip(scaled, _F32(qmin) - zero_point, _F32(qmax) - zero_point, out=scaled)
    np.rint(scaled, out=scaled)
    scaled += zero_point
    np.copyto(out, scaled, casting="unsafe")


def _quantize_rows(x: np.ndarray, quant: Quant, out: np.ndarray) -> None:
    """Per row: XNNPACK's ``xnn_f32_qd8_asymmetric_quantization_params`` of the row's range
    (widened to hold 0), then the f32 -> qs8 convert with scale ``1 / inv_scale``."""
    rows = np.asarray(x, _F32).reshape(quant.rows, -1)
    qmin, qmax = _F32(-128), _F32(127)
    rmin = np.minimum(rows.min(axis=1, initial=0), _F32(0))
    rmax = np.maximum(rows.max(axis=1, initial=0), _F32(0))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(rmin == rmax, _F32(1), (qmax - qmin) / (rmax - rmin)).astype(_F32)
    low, high = rmin * scale, rmax * scale
    zero = np.where((qmin + low) + (qmax + high) > 0, qmin - low, qmax - high).astype(_F32)
    zero = np.rint(np.clip(zero, qmin, qmax)).astype(np.int32)
    inv_scale = (_F32(1) / scale).astype(_F32)
    quant.row_scale[:] = inv_scale
    quant.row_zero_point[:] = zero
    multiplier = (_F32(1) / inv_scale).astype(_F32)[:, None]
    scaled = np.multiply(rows, multiplier, dtype=_F32)
    _round_into(scaled, zero[:, None].astype(_F32), -128, 127, out.reshape(quant.rows, -1))


def dequantize(q: np.ndarray, quant: Quant, out: np.ndarray) -> None:
    """int -> float: ``(q - zero_point) * scale`` in float32 (per row for dynamic values)."""
    if quant.dynamic:
        rows = q.reshape(quant.rows, -1).astype(_F32) - quant.row_zero_point[:, None].astype(_F32)
        np.multiply(rows, quant.row_scale[:, None], out=out.reshape(quant.rows, -1), casting="unsafe")
        return
    centered = np.subtract(q, quant.zero_point, dtype=_F32)
    np.multiply(centered, quant.scale[0], out=out, casting="unsafe")


def requantization_scale(input_scale, kernel_scale: np.ndarray, output_scale) -> np.ndarray:
    """XNNPACK's ``input_scale * kernel_scale[c] / output_scale``, each step in float32."""
    product = np.multiply(_F32(input_scale), np.asarray(kernel_scale, _F32), dtype=_F32)
    return np.divide(product, _F32(output_scale), dtype=_F32)


def requantize(acc: np.ndarray, scale: np.ndarray, quant: Quant, bounds: tuple[int, int], out: np.ndarray) -> None:
    """An exact integer accumulator (any dtype holding it exactly) to ``out``: as float32, times
    ``scale`` (broadcast over the last dim), rounded to nearest even, plus the output zero point,
    clamped to ``bounds``."""
    scaled = np.multiply(acc.astype(_F32), scale, dtype=_F32)
    _round_into(scaled, quant.zero_point, bounds[0], bounds[1], out)


def quantize_bound(value: float, quant: Quant) -> int:
    """XNNPACK's ``xnn_qs8_quantize`` of a float bound: ``lrintf(clamp(value / scale + zp))``."""
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = _F32(value) / quant.scale[0] + _F32(quant.zero_point)
    return int(np.rint(np.clip(scaled, _F32(quant.qmin), _F32(quant.qmax))))


def output_bounds(ctx, quant: Quant) -> tuple[int, int]:
    """The node's fused ``output_min_max`` in the output's quantized domain (its full range if none)."""
    bounds = ctx.output_min_max
    if bounds is None:
        return quant.qmin, quant.qmax
    ctx.check(not bounds.output_min > bounds.output_max, "output_min is greater than output_max")
    return quantize_bound(bounds.output_min, quant), quantize_bound(bounds.output_max, quant)


def clamp_step(ctx, out: np.ndarray, quant: Quant):
    """The step clamping ``out`` in place to the node's fused bounds (`output_bounds`), or None
    when they are the output's whole range."""
    low, high = output_bounds(ctx, quant)
    if (low, high) == (quant.qmin, quant.qmax):
        return None
    return functools.partial(np.clip, out, low, high, out=out)


def q8_multiplier(ctx, ratio, what: str) -> int:
    """XNNPACK's Q8 fixed-point multiplier ``lrintf(256 * ratio)`` of an input / output scale
    ratio (its qs8 convert and leaky ReLU kernels); the ratio must lie in [2**-8, 2**7]."""
    ratio = _F32(ratio)
    ctx.check(
        _F32(2.0**-8) <= abs(ratio) <= _F32(2.0**7), f"{what} {float(ratio)} is outside XNNPACK's range [2**-8, 2**7]"
    )
    return int(np.rint(np.multiply(_F32(256), ratio, dtype=_F32)))
