"""Memory-format conversions become ExecuTorch's dim-order copy operators in the `.pte`.

``_to_copy(x, memory_format=channels_last)`` and ``clone(x, memory_format=...)``
are written as ``dim_order_ops::_to_dim_order_copy.out`` /
``dim_order_ops::_clone_dim_order.out`` with an explicit ``dim_order`` list, the
form both runtimes execute; the output tensor itself carries that dim order.
"""

from __future__ import annotations

import torch

__all__ = ["DIM_ORDERS", "dim_order_variant"]

DIM_ORDERS = {torch.channels_last: (0, 2, 3, 1), torch.channels_last_3d: (0, 2, 3, 4, 1)}

_VARIANTS = {torch.ops.aten._to_copy.out: "_to_dim_order_copy", torch.ops.aten.clone.out: "_clone_dim_order"}


def _target_order(memory_format, rank: int) -> tuple[int, ...] | None:
    if memory_format == torch.contiguous_format:
        return tuple(range(rank))
    return DIM_ORDERS.get(memory_format)


def dim_order_variant(op, bound: dict, result: torch.Tensor) -> tuple[str, list] | None:
    """``(operator name, [self, non_blocking, dim_order])`` when ``op`` sets an explicit layout.

    ``preserve_format`` (or none) keeps the aten operator: its output has its input's dim order.
    """
    name = _VARIANTS.get(op)
    if name is None:
        return None
    order = _target_order(bound.get("memory_format"), result.dim())
    if order is None:
        return None
    return f"dim_order_ops::{name}", [bound["self"], bool(bound.get("non_blocking", False)), list(order)]
