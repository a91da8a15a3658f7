"""The lower bounds of a method's dynamic input dimensions, which the `.pte` format cannot hold.

A tensor's planned sizes are its upper bound. The exported range's lower end (and the size of
each static dimension of a dynamic input) is recorded in the program's named data (see
`torchedge.runtime.method_meta`), so that torchedge's runtime refuses an input smaller than the
range the program was exported and verified for.
"""

from __future__ import annotations

import sympy
import torch
from torch.export import ExportedProgram
from torch.utils._sympy.value_ranges import bound_sympy

from torchedge.runtime.method_meta import encode_input_minimums, input_minimums_key

__all__ = ["input_minimums", "input_minimums_data"]


def input_minimums(ep: ExportedProgram) -> list[tuple[int, int, int]]:
    """``(input position, dim, minimum)`` for the dimensions of dynamic user inputs whose range
    starts above 0; a static dimension of a dynamic input has its size as minimum (the tensor's
    planned sizes bound it from above only)."""
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    found = []
    for position, name in enumerate(ep.graph_signature.user_inputs):
        value = placeholders[name].meta.get("val") if name in placeholders else None
        if not isinstance(value, torch.Tensor) or all(isinstance(s, int) for s in value.shape):
            continue
        for dim, size in enumerate(value.shape):
            minimum = _lowest(size, ep.range_constraints) if isinstance(size, torch.SymInt) else size
            if minimum > 0:
                found.append((position, dim, minimum))
    return found


def input_minimums_data(methods: dict[str, ExportedProgram]) -> dict[str, bytes]:
    """The named data recording every method's input lower bounds (methods without any: none)."""
    data = {}
    for name, ep in methods.items():
        entries = input_minimums(ep)
        if entries:
            data[input_minimums_key(name)] = encode_input_minimums(entries)
    return data


def _lowest(size: torch.SymInt, ranges) -> int:
    expr = size.node.expr
    lower = bound_sympy(expr, {s: ranges[s] for s in expr.free_symbols if s in ranges}).lower
    return int(lower) if lower.is_finite and lower != -sympy.oo else 0
