"""Edge operators: ATen operators whose schema carries the dtypes the Edge spec allows.

``edge.aten.sigmoid.default`` wraps ``torch.ops.aten.sigmoid.default``: calling it calls
the ATen operator, other attributes are the ATen operator's, and ``_schema.arguments`` and
``_schema.returns`` hold, for each tensor, an `EdgeArgument` whose ``allowed_types`` is
the set of dtypes some constraint in `edge.yaml` admits for it.

>>> op = edge_op(torch.ops.aten.sigmoid.default)
>>> op is EdgeOps().aten.sigmoid.default, op.name(), op.__name__
(True, 'aten::sigmoid', 'aten.sigmoid.default')
"""

from __future__ import annotations

import functools

import torch

from torchedge.exir.dialects.spec import OpSpec, is_tensor_like, op_spec, tensor_io_names

__all__ = ["EdgeArgument", "EdgeFunctionSchema", "EdgeOpOverload", "EdgeOpOverloadPacket", "EdgeOps", "edge_op"]


class EdgeArgument:
    """A schema argument or return (``torch.Argument``) with the dtypes its tensor may have."""

    def __init__(self, argument: torch.Argument, allowed_types: set[torch.dtype]):
        self.argument = argument
        self.allowed_types = allowed_types

    def __getattr__(self, name: str):
        if name == "argument":  # not yet set (copy, unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.argument, name)

    def __repr__(self) -> str:
        return f"EdgeArgument({self.argument}, allowed_types={sorted(map(str, self.allowed_types))})"


class EdgeFunctionSchema:
    """An ATen ``FunctionSchema`` whose tensor arguments and returns are `EdgeArgument`\\ s."""

    def __init__(self, schema: torch.FunctionSchema, spec: OpSpec):
        self.schema = schema
        self.spec = spec
        arg_names, ret_names = tensor_io_names(schema)
        self.arguments = [
            EdgeArgument(a, spec.allowed_types(a.name)) if a.name in arg_names else a for a in schema.arguments
        ]
        names = iter(ret_names)
        self.returns = [
            EdgeArgument(r, spec.allowed_types(next(names))) if is_tensor_like(r.type) else r for r in schema.returns
        ]

    def __getattr__(self, name: str):
        if name == "schema":
            raise AttributeError(name)
        return getattr(self.schema, name)

    def __str__(self) -> str:
        return str(self.schema)


class EdgeOpOverload:
    """An Edge operator: calls through to ``_op``, the ATen ``OpOverload`` it wraps."""

    def __init__(self, op: torch._ops.OpOverload):
        self._op = op
        self._schema = EdgeFunctionSchema(op._schema, op_spec(op))
        self.__name__ = f"{op.namespace}.{op._opname}.{op._overloadname}"

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def __getattr__(self, name: str):
        if name == "_op":
            raise AttributeError(name)
        return getattr(self._op, name)

    def __deepcopy__(self, memo) -> EdgeOpOverload:
        return self  # one object per operator, as for ATen operators

    def __repr__(self) -> str:
        return f"<EdgeOpOverload: {self.__name__}>: schema = {self._schema}"


@functools.cache
def edge_op(op: torch._ops.OpOverload) -> EdgeOpOverload:
    """The Edge operator of an ATen ``OpOverload`` (one object per operator)."""
    return EdgeOpOverload(op)


class EdgeOpOverloadPacket:
    """``edge.aten.add``: its overloads (``.Tensor``, ``.Scalar``) are Edge operators."""

    def __init__(self, packet: torch._ops.OpOverloadPacket):
        self._packet = packet
        self.__name__ = f"edge.{packet._qualified_op_name.replace('::', '.')}"

    def __getattr__(self, overload: str) -> EdgeOpOverload:
        if overload.startswith("__") or overload == "_packet":
            raise AttributeError(overload)
        try:
            op = getattr(self._packet, overload)
        except AttributeError:
            raise AttributeError(
                f"operator '{self._packet._qualified_op_name}' has no overload '{overload}'; "
                f"it has {self._packet.overloads()}"
            ) from None
        return edge_op(op)

    def __repr__(self) -> str:
        return f"<EdgeOpOverloadPacket {self.__name__}>"


class _EdgeNamespace:
    """``edge.aten``: the Edge operators of one ``torch.ops`` namespace."""

    def __init__(self, name: str):
        self._name = name

    @functools.cache  # noqa: B019  (namespaces live as long as the process)
    def __getattr__(self, op_name: str) -> EdgeOpOverloadPacket:
        if op_name.startswith("__") or op_name == "_name":
            raise AttributeError(op_name)
        try:
            packet = getattr(getattr(torch.ops, self._name), op_name)
        except AttributeError:
            raise AttributeError(f"no operator '{self._name}::{op_name}' is registered with torch") from None
        return EdgeOpOverloadPacket(packet)


class EdgeOps:
    """The root of the Edge operator namespaces: ``EdgeOps().aten.sigmoid.default``."""

    @functools.cache  # noqa: B019  (namespaces live as long as the process)
    def __getattr__(self, namespace: str) -> _EdgeNamespace:
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        return _EdgeNamespace(namespace)
