"""The table of Edge operators the ONNX lowering translates, and under which conditions.

A translation is registered with ``@lowers(op, ..., dtypes=..., check=...)``:
it runs only when the dtype it computes in (by default its output dtype) is
one ONNX Runtime's CPU kernel for that operator accepts, and ``check`` (if
given) accepts the node's arguments. It receives the `GraphBuilder` and the
node's `NodeArgs`, and returns the ONNX value name of each output.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import torch

from torchedge.backends.onnxruntime.builder import ONNX_DTYPES, GraphBuilder
from torchedge.errors import InternalError
from torchedge.exir.ir import bind_arguments

__all__ = ["NodeArgs", "Lowering", "lowers", "lowering_for", "first_output_only", "FLOAT32", "FLOATS", "NUMERIC", "ANY"]

FLOAT32 = frozenset({torch.float32})
FLOATS = frozenset({torch.float32, torch.float64})
NUMERIC = FLOATS | {torch.int32, torch.int64}
ANY = ONNX_DTYPES


def _proxy(arg):
    """A stand-in with the dtype and "has dimensions" of a tensor argument, for type promotion."""
    if not isinstance(arg, torch.fx.Node):
        return arg
    val = arg.meta["val"]
    return torch.empty(() if val.dim() == 0 else (1,), dtype=val.dtype)


class NodeArgs:
    """One call node's arguments by schema name (defaults filled in) and its meta values."""

    def __init__(self, node: torch.fx.Node):
        self.node = node
        self.args = bind_arguments(node.target, node.args, node.kwargs)
        for schema_arg in node.target._schema.arguments:
            if schema_arg.name not in self.args and schema_arg.has_default_value():
                self.args[schema_arg.name] = schema_arg.default_value

    def __getitem__(self, name: str):
        return self.args[name]

    @property
    def out(self):
        """The node's meta value: a tensor, or a list of tensors."""
        return self.node.meta["val"]

    @property
    def out_dtype(self) -> torch.dtype:
        out = self.out
        return (out[0] if isinstance(out, (list, tuple)) else out).dtype

    @property
    def out_shape(self) -> list[int]:
        return [int(s) for s in self.out.shape]

    def val(self, name: str) -> torch.Tensor:
        """The meta value of a tensor argument."""
        return self.args[name].meta["val"]

    def rank(self, name: str = "self") -> int:
        return self.val(name).dim()

    def promoted(self, lhs: str = "self", rhs: str = "other") -> torch.dtype:
        """The dtype PyTorch computes a binary operator in."""
        return torch.result_type(_proxy(self.args[lhs]), _proxy(self.args[rhs]))


def first_output_only(a: NodeArgs) -> bool:
    """Only output 0 of a multi-output operator is read (the rest have no ONNX equivalent here)."""
    return all(u.target is operator.getitem and u.args[1] == 0 for u in a.node.users)


def output_dtype(a: NodeArgs) -> torch.dtype:
    return a.out_dtype


@dataclass(frozen=True)
class Lowering:
    translate: Callable[[GraphBuilder, NodeArgs], str | list[str]]
    dtypes: frozenset  # dtypes ONNX Runtime's CPU kernel accepts for ...
    dtype_of: Callable[[NodeArgs], torch.dtype]  # ... the dtype this picks from the node
    check: Callable[[NodeArgs], bool] | None
    dynamic_rows: bool = False  # tensors may have symbolic sizes in all but their last dimension

    def accepts(self, a: NodeArgs) -> bool:
        return self.dtype_of(a) in self.dtypes and (self.check is None or bool(self.check(a)))


_LOWERINGS: dict[torch._ops.OpOverload, Lowering] = {}


def lowers(
    *ops: torch._ops.OpOverload,
    dtypes: frozenset = ANY,
    dtype_of: Callable[[NodeArgs], torch.dtype] = output_dtype,
    check: Callable[[NodeArgs], bool] | None = None,
    dynamic_rows: bool = False,
):
    """Register the decorated function as the translation of ``ops``; with ``dynamic_rows`` its
    tensors may have symbolic sizes except in the last dimension (the translation must not read them)."""

    def register(translate):
        for op in ops:
            if op in _LOWERINGS:
                raise InternalError(f"two ONNX lowerings registered for {op}")
            _LOWERINGS[op] = Lowering(translate, frozenset(dtypes), dtype_of, check, dynamic_rows)
        return translate

    return register


def lowering_for(op) -> Lowering | None:
    return _LOWERINGS.get(op)
