"""Quantized input embeddings, as ExecuTorch's quantized kernel library computes them.

``8w``: int8 rows, one symmetric scale per row (``quantized_decomposed::embedding_byte``);
``4w``: 4-bit values in groups of ``group_size`` columns, one symmetric scale per group, two values
a byte, high nibble first, stored as value + 8 (``quantized_decomposed::embedding_4bit``).
The operators live in torchedge's namespace (`torchedge.exir.ir.QUANTIZED_NAMESPACE`) and carry
ExecuTorch's names in a ``.pte``, so the program runs on either runtime.

A head tied to the embedding (``tie_word_embeddings``) keeps its float weight: the ``.pte`` then
holds the quantized embedding and the float head.
"""

from __future__ import annotations

import torch

from torchedge.cli.recipes import QEMBEDDING_SCHEMES
from torchedge.errors import ExportError
from torchedge.exir.ir import QUANTIZED_NAMESPACE

__all__ = ["QuantizedEmbedding", "quantize_embedding", "quantize_rows"]

_BITS = {"8w": 8, "4w": 4}
_SCHEMA = (
    "(Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, "
    "Tensor indices) -> Tensor"
)
_LIBRARY: torch.library.Library | None = None


def _embedding_4bit(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices):
    """The eager operator: unpack the rows, subtract each group's zero point (if any), scale, look up."""
    count = weight.shape[0]
    values = torch.stack([(weight >> 4).to(torch.int32) - 8, (weight & 0x0F).to(torch.int32) - 8], dim=-1)
    scales = weight_scales.reshape(count, -1, 1)
    values = values.reshape(count, scales.shape[1], -1).to(weight_scales.dtype)
    if weight_zero_points is not None:
        values = values - weight_zero_points.reshape(count, -1, 1).to(weight_scales.dtype)
    return torch.ops.aten.embedding.default((values * scales).reshape(count, -1), indices)


def _embedding_4bit_out(*args, out):
    return out.copy_(_embedding_4bit(*args))


def _operators():
    """``(embedding_byte, embedding_4bit)`` in torchedge's quantized namespace, defined once."""
    global _LIBRARY
    from torchedge.exir.backend_dialect import QuantFusion

    QuantFusion()  # defines embedding_byte (the fusion of dequantize_per_channel -> embedding)
    namespace = getattr(torch.ops, QUANTIZED_NAMESPACE)
    if _LIBRARY is None and not hasattr(namespace, "embedding_4bit"):
        _LIBRARY = torch.library.Library(QUANTIZED_NAMESPACE, "FRAGMENT")
        _LIBRARY.define(f"embedding_4bit{_SCHEMA}")
        _LIBRARY.impl("embedding_4bit", _embedding_4bit, "CompositeExplicitAutograd")
        _LIBRARY.define(f"embedding_4bit.out{_SCHEMA.replace(') -> Tensor', ', *, Tensor(a!) out) -> Tensor(a!)')}")
        _LIBRARY.impl("embedding_4bit.out", _embedding_4bit_out, "CompositeExplicitAutograd")
    return namespace.embedding_byte.default, namespace.embedding_4bit.default


def quantize_rows(weight: torch.Tensor, bits: int, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, scales)``: symmetric round-to-nearest of each group of ``group_size`` columns to
    ``bits`` bits (int8 values in [-2^(bits-1), 2^(bits-1) - 1]); scales ``[rows, groups]`` in float32."""
    rows, dim = weight.shape
    grouped = weight.detach().to(torch.float32).reshape(rows, dim // group_size, group_size)
    high = 2 ** (bits - 1) - 1
    scales = grouped.abs().amax(dim=-1) / high
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    values = torch.clamp(torch.round(grouped / scales[..., None]), -high - 1, high).to(torch.int8)
    return values.reshape(rows, dim), scales


class QuantizedEmbedding(torch.nn.Module):
    """An ``nn.Embedding`` of quantized rows (see the module), float32 scales, rows returned in the
    embedding's dtype."""

    def __init__(self, embedding: torch.nn.Embedding, scheme: str, group_size: int | None = None):
        super().__init__()
        if scheme not in _BITS:
            raise ExportError(f"--qembedding {scheme}: unknown scheme; choose from {', '.join(QEMBEDDING_SCHEMES)}")
        self.bits = _BITS[scheme]
        dim = embedding.embedding_dim
        group_size = group_size or dim
        if dim % group_size or (self.bits == 4 and group_size % 2):
            raise ExportError(
                f"--qembedding {scheme}: groups of {group_size} columns do not divide the embedding dim {dim}"
                + (" into even groups" if self.bits == 4 else "")
            )
        values, scales = quantize_rows(embedding.weight, self.bits, group_size)
        if self.bits == 4:
            biased = (values.to(torch.int16) + 8).to(torch.uint8).reshape(values.shape[0], -1, 2)
            values = (biased[..., 0] << 4) | biased[..., 1]
        self.register_buffer("weight", values)
        self.register_buffer("scales", scales if self.bits == 4 else scales.squeeze(1))
        self.dtype = embedding.weight.dtype
        self.operator = _operators()[0 if self.bits == 8 else 1]  # defined before export traces forward

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        low = -(2 ** (self.bits - 1))
        return self.operator(self.weight, self.scales, None, low, -low - 1, indices).to(self.dtype)


def quantize_embedding(model, scheme: str, group_size: int | None = None) -> str:
    """Replace ``model``'s input embedding (``get_input_embeddings``) by a `QuantizedEmbedding`; a
    line saying what was done (and that a tied head stays float)."""
    embedding = model.get_input_embeddings()
    if not isinstance(embedding, torch.nn.Embedding):
        raise ExportError(f"--qembedding {scheme}: the model's input embedding is a {type(embedding).__name__}")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    tied = head is not None and getattr(head, "weight", None) is embedding.weight
    model.set_input_embeddings(QuantizedEmbedding(embedding, scheme, group_size))
    rows, dim = embedding.weight.shape
    note = "; the head shares its weight (tie_word_embeddings) and stays float" if tied else ""
    return f"embedding {rows} x {dim} quantized ({scheme}){note}"
