"""The decomposition table of the core-ATen stage: torch.export's, with torchedge's own choices.

* Kept whole, for their own kernels: operators whose torch decomposition guards on tensor
  values (``take``: on its indices), which an exported program cannot do.
* Decomposed exactly into ATen: custom operators of ``torch.nn`` that have no out variant
  (the chunked ``linear_cross_entropy``), computed as linear then cross entropy in the
  accumulation dtype the call names.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.modules import linear_cross_entropy

__all__ = ["decomposition_table"]

_KEPT_WHOLE = (torch.ops.aten.take.default,)


def _chunked_loss(
    input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing, acc_dtype
):
    acc = acc_dtype or input.dtype
    bias = None if linear_bias is None else linear_bias.to(acc)
    logits = F.linear(input.to(acc), linear_weight.to(acc), bias)
    loss = F.cross_entropy(
        logits,
        target,
        None if weight is None else weight.to(acc),
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )
    return loss.to(input.dtype)


def _linear_cross_entropy(
    input,
    linear_weight,
    target,
    linear_bias,
    weight,
    reduction,
    ignore_index,
    label_smoothing,
    batch_chunk_size,
    acc_policy,
    acc_dtype,
    allow_retain_graph,
    compute_input_grad,
    compute_linear_weight_grad,
    compute_linear_bias_grad,
):
    loss = _chunked_loss(
        input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing, acc_dtype
    )
    # The other outputs are gradients saved for autograd's backward, which no inference program
    # reads (the public function returns the loss only): uncomputed, of the shapes the op gives them.
    return (
        loss,
        input.new_empty(input.shape if compute_input_grad else (0, 0)),
        input.new_empty(linear_weight.shape if compute_linear_weight_grad else (0, 0)),
        input.new_empty(linear_weight.shape[:-1] if compute_linear_bias_grad else (0,)),
    )


def _linear_cross_entropy_no_reduction(
    input, linear_weight, target, linear_bias, weight, ignore_index, batch_chunk_size, acc_policy, acc_dtype
):
    return _chunked_loss(input, linear_weight, target, linear_bias, weight, "none", ignore_index, 0.0, acc_dtype)


_DECOMPOSED = {
    linear_cross_entropy._linear_cross_entropy_batch_chunked._opoverload: _linear_cross_entropy,
    linear_cross_entropy._linear_cross_entropy_batch_chunked_no_reduction._opoverload: (
        _linear_cross_entropy_no_reduction
    ),
}


def decomposition_table() -> dict:
    table = torch.export.default_decompositions()
    for op in _KEPT_WHOLE:
        table.pop(op, None)
    table.update(_DECOMPOSED)
    return table
