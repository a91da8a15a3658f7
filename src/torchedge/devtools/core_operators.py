"""The core ATen operator set, each operator with the name of the kernel the runtime calls for it.

>>> core_operator_of(torch.ops.aten.add.out).name
'aten::add.Tensor'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from torchedge.devtools.kernel_check import kernel_op
from torchedge.exir.ir import op_name
from torchedge.exir.op_schema import is_inplace, view_copy_variant

__all__ = ["CoreOperator", "core_operators", "core_operator_of", "edge_operator_of"]


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


@functools.cache
def _kernel_index() -> dict:
    """Each non-core ATen operator the runtime has a kernel for (and its out variant) -> its record."""
    from torchedge.kernels.registry import registered_operators

    index = {}
    for name in registered_operators():
        namespace, _, rest = name.partition("::")
        packet = getattr(torch.ops.aten, rest.partition(".")[0], None) if namespace == "aten" else None
        for overload in packet.overloads() if packet is not None else ():
            op = getattr(packet, overload)
            if _comparable(op) and core_operator_of(op) is None and op_name(kernel_op(op)) == name:
                index[op] = CoreOperator(op, name)
    functional = {record.kernel: record for op, record in index.items() if op_name(op) != record.kernel}
    return {op: functional.get(record.kernel, record) for op, record in index.items()}


def _comparable(op) -> bool:
    """Whether eager's result of ``op`` can be compared with a kernel's: not for operators that
    write their input (``copy_``; they run as part of other programs), leave it uninitialized
    or draw random numbers (their own tests check shapes, dtypes and distributions)."""
    uninitialized = op._schema.name.startswith(("aten::empty", "aten::new_empty"))
    return not is_inplace(op) and not uninitialized and torch.Tag.nondeterministic_seeded not in op.tags


def edge_operator_of(op) -> CoreOperator | None:
    """Like `core_operator_of`, and also for the non-core operators the runtime has kernels for
    (``torch.special``, ``linalg``, ...), which the Edge dialect admits."""
    return core_operator_of(op) or _kernel_index().get(op)
