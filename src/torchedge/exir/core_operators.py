"""The core ATen operator set the Edge dialect is built on, each operator with the name of the
kernel the runtime calls for it (`kernel_op`: its out variant, a view's through its copy twin).

>>> core_operator_of(torch.ops.aten.add.out).name
'aten::add.Tensor'
>>> op_name(kernel_op(torch.ops.aten.view.default))
'aten::view_copy.out'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from torchedge.errors import ExportError
from torchedge.exir.ir import op_name
from torchedge.exir.op_schema import is_out_variant, out_variant, view_copy_variant

__all__ = ["CoreOperator", "core_operators", "core_operator_of", "kernel_op"]


@functools.cache
def kernel_op(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The operator the runtime calls for ``op``: its out variant (a view's through its copy
    twin), or ``op`` itself for the primitive operators (``sym_size``, ``_local_scalar_dense``)."""
    if is_out_variant(op):
        return op
    target = view_copy_variant(op) or op
    try:
        return out_variant(target)
    except ExportError:
        return target


@dataclass(frozen=True)
class CoreOperator:
    """A core ATen operator and the name of the kernel the runtime calls for it."""

    op: torch._ops.OpOverload
    kernel: str

    @property
    def name(self) -> str:
        return op_name(self.op)


@functools.cache
def core_operators() -> tuple[CoreOperator, ...]:
    """Every ATen overload tagged ``torch.Tag.core``, sorted by name."""
    ops = []
    for name in torch._C._dispatch_get_all_op_names():  # dir(torch.ops.aten) lists only the loaded ones
        namespace, _, rest = name.partition("::")
        packet_name, _, overload = rest.partition(".")
        if namespace == "aten":
            op = getattr(getattr(torch.ops.aten, packet_name), overload or "default")
            if torch.Tag.core in op.tags:
                ops.append(op)
    return tuple(sorted((CoreOperator(op, op_name(kernel_op(op))) for op in ops), key=lambda c: c.name))


@functools.cache
def _core_index() -> dict:
    """Each core operator, its copy twin and its out variant -> the core operator."""
    index = {core.op: core for core in core_operators()}  # a core-tagged out variant stands for itself
    for core in core_operators():
        for op in (view_copy_variant(core.op), kernel_op(core.op)):
            if op is not None:
                index.setdefault(op, core)
    return index


def core_operator_of(op) -> CoreOperator | None:
    """The core operator ``op`` is, or is the copy twin or out variant of."""
    return _core_index().get(op)
