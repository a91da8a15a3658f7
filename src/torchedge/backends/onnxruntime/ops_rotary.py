"""``torchedge_ort::rotary_half`` (see `rotary`) as ``com.microsoft::RotaryEmbedding``: the
query or key heads [b, n, s, d] rotated by the halves [s, d/2] of the tables, token ``i`` reading
row ``i`` (one position start, 0), the halves of each head not interleaved."""

from __future__ import annotations

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.ops_lowbit import MICROSOFT
from torchedge.backends.onnxruntime.registry import FLOAT32, NodeArgs, lowers
from torchedge.backends.onnxruntime.rotary import NAMESPACE, rotary_fits

__all__: list[str] = []  # the translation registers itself


@lowers(
    getattr(torch.ops, NAMESPACE).rotary_half.default,
    dtypes=FLOAT32,
    check=lambda a: rotary_fits(a.val("x"), a.val("cos"), a.val("sin")),
    dynamic_rows=True,
)
def _rotary(g: GraphBuilder, a: NodeArgs) -> str:
    inputs = [g.tensor(a["x"]), g.int64s([0]), g.tensor(a["cos"]), g.tensor(a["sin"])]
    return g.emit("RotaryEmbedding", inputs, domain=MICROSOFT, interleaved=0)
