"""The decomposition table of the core-ATen stage: torch.export's, with torchedge's own choices.

* Kept whole, for their own kernels: operators whose torch decomposition guards on tensor
  values (``take``: on its indices), which an exported program cannot do.
* Decomposed exactly into ATen: custom operators of ``torch.nn`` that have no out variant
  (the chunked ``linear_cross_entropy``), computed as linear then cross entropy in the
  accumulation dtype the call names.

`cached_cia_ops` spares each decomposition torch's walk over the dispatcher for the
CompositeImplicitAutograd operators it may keep (a sixth to a quarter of a small model's
`to_edge`).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch.nn.modules import linear_cross_entropy

__all__ = ["decomposition_table", "cached_cia_ops"]

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


_CIA = threading.local()  # .ops: (number of registered operator names, torch's set for them)


def _valid_cia_ops(original):
    """torch's set of preservable CompositeImplicitAutograd operators, computed again only when
    operators have been registered since (a custom op library loaded between two exports)."""
    count = len(torch._C._dispatch_get_all_op_names())
    cached = getattr(_CIA, "ops", None)
    if cached is None or cached[0] != count:
        cached = _CIA.ops = (count, original())
    return set(cached[1])


@contextmanager
def cached_cia_ops():
    """Within the block, torch's ``run_decompositions`` reuses the CompositeImplicitAutograd
    operator set of the previous decomposition while no operator was registered since."""
    from torch._export import utils
    from torch.export import decomp_utils, exported_program

    modules = (utils, decomp_utils, exported_program)
    saved = [m._collect_all_valid_cia_ops for m in modules]
    original = getattr(utils._collect_all_valid_cia_ops, "__wrapped__", utils._collect_all_valid_cia_ops)

    def collect():
        return _valid_cia_ops(original)

    collect.__wrapped__ = original
    for module in modules:
        module._collect_all_valid_cia_ops = collect
    try:
        yield
    finally:
        for module, function in zip(modules, saved):
            module._collect_all_valid_cia_ops = function
