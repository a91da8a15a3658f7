"""``torchedge_fused::safe_softmax_rows``: the safe softmax's masking alone, for the load-time
rule of that name (`torchedge.fusion.rules_attention`), where attention's other steps run
elsewhere (in an XNNPACK program's delegates).

The decomposition writes it as six steps: ``where(logical_not(any(logical_not(eq(scores, -inf)),
dim, keepdim=True)), full_like(probs, 0), probs)``. A slice of ``scores`` is all -inf exactly
when its maximum is -inf (a nan makes the maximum nan, as it makes ``eq`` false), and only a
slice whose first score is -inf can be: the kernel copies ``probs`` and looks for such rows only
where a first score is -inf (never, under causal and padding masks). The bits of the steps.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, fail, wrap_dim
from torchedge.kernels.registry import register_kernel

__all__ = ["safe_softmax_rows"]

_OP = "torchedge_fused::safe_softmax_rows.out"


def _shape(op: str, scores, probs, dim, out) -> list[tuple]:
    check(
        scores.shape == probs.shape and scores.ndim >= 1,
        op,
        f"scores {list(scores.shape)} and probs {list(probs.shape)} must have one shape of at least one dim",
    )
    wrap_dim(dim, scores.ndim, op)
    return [probs.shape]


@register_kernel(_OP, shape=_shape)
def safe_softmax_rows(scores, probs, dim, out):
    """``probs`` with zeros where every score along ``dim`` is -inf."""
    (shape,) = _shape(_OP, scores, probs, dim, out)
    if out.shape != shape or out.dtype != probs.dtype or scores.dtype != probs.dtype:
        fail(_OP, f"expects scores, probs and out of one dtype and shape, got {out.dtype}{list(out.shape)}")
    if out.size == 0:
        return
    axis = wrap_dim(dim, scores.ndim, _OP)
    empty = None  # scores are read before out is written: out may take their place
    if np.isneginf(scores[(slice(None),) * axis + (0,)]).any():  # a row to zero starts with -inf
        empty = np.isneginf(np.max(scores, axis=axis, keepdims=True))
    np.copyto(out, probs)
    if empty is not None:
        np.copyto(out, 0, where=empty)
