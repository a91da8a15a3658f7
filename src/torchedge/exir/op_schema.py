"""Facts about ATen operator schemas: out variants and view-free copies.

Pure look-ups over ``torch._ops.OpOverload`` objects, cached per operator.
"""

from __future__ import annotations

import functools

import torch

from torchedge.errors import ExportError
from torchedge.exir.dialects.quantized import out_variant_candidates
from torchedge.exir.ir import op_name

__all__ = ["out_variant", "out_argument_names", "view_copy_variant", "is_out_variant", "is_inplace"]

# Arguments of a functional op that its out variant drops: `out` already fixes them.
_DROPPED_BY_OUT = {"dtype", "layout", "device", "pin_memory"}


def out_argument_names(op: torch._ops.OpOverload) -> list[str]:
    """Names of the kwarg-only tensors an out variant writes (``["out"]``, ``["values", "indices"]``)."""
    return [a.name for a in op._schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def is_out_variant(op) -> bool:
    return isinstance(op, torch._ops.OpOverload) and bool(out_argument_names(op))


def returns_nothing(op) -> bool:
    """A check that writes no tensor (``aten._linalg_check_errors``): it runs as it is, no out variant."""
    return isinstance(op, torch._ops.OpOverload) and not op._schema.returns and not out_argument_names(op)


def is_inplace(op) -> bool:
    """An in-place op (``aten.copy_``, ``aten.index_put_``): it writes its first, positional argument."""
    if not isinstance(op, torch._ops.OpOverload) or not op._schema.arguments:
        return False
    first = op._schema.arguments[0]
    return not first.kwarg_only and first.alias_info is not None and first.alias_info.is_write


def _matches(functional, candidate) -> bool:
    outs = out_argument_names(candidate)
    if not outs or len(outs) != len(functional._schema.returns):
        return False
    cand_args = {a.name: a for a in candidate._schema.arguments if a.name not in outs}
    func_args = {a.name: a for a in functional._schema.arguments}
    for name, arg in func_args.items():
        if name in cand_args:
            if str(cand_args[name].type) != str(arg.type):
                return False
        elif name not in _DROPPED_BY_OUT:
            return False
    return all(a.has_default_value() or n in func_args for n, a in cand_args.items())


@functools.cache
def out_variant(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The out variant of a functional ATen op (``aten.add.Tensor`` -> ``aten.add.out``)."""
    packet = op.overloadpacket
    candidates = [getattr(packet, name) for name in packet.overloads()]
    twin = getattr(torch.ops.aten, packet.__name__.removesuffix("_functional"), None)
    if packet.__name__.endswith("_functional") and twin is not None:  # normal_functional -> normal.out
        candidates += [getattr(twin, name) for name in twin.overloads()]
    if op.namespace == "quantized_decomposed":  # ExecuTorch's out variants when loaded, else torchedge's
        candidates += out_variant_candidates(op)
    for candidate in candidates:
        if _matches(op, candidate):
            return candidate
    raise ExportError(f"operator '{op_name(op)}' has no out variant, so it cannot be emitted to a .pte")


@functools.cache
def view_copy_variant(op: torch._ops.OpOverload):
    """The copying twin of a view op (``aten.view.default`` -> ``aten.view_copy.default``), or None."""
    if not op.is_view:
        return None
    packet_name = op.overloadpacket.__name__
    copy_packet = getattr(torch.ops.aten, f"{packet_name}_copy", None)
    if copy_packet is None:
        return None
    return getattr(copy_packet, op._overloadname, None)
