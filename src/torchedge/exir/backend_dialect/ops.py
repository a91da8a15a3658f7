"""Backend operators: `bind_pattern_to_op` binds a pattern of Edge operators to an operator of a
`torch.library` namespace, which the backend dialect's passes put in the pattern's place.

The operator is an ordinary ``torch.library`` operator. Where it has no implementation of its own,
the pattern becomes its ``CompositeImplicitAutograd`` kernel, so eager calls run the pattern and a
re-export decomposes the operator back into it. An out variant (``name.out``) is defined beside it
when the library lacks one, so that `to_executorch` can emit it, and the kernel given with
``kernel=`` is registered for torchedge's runtime under the name the `.pte` gives it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch

from torchedge.errors import ExportError
from torchedge.exir.ir import QUANTIZED_NAMESPACE, op_name
from torchedge.exir.op_schema import out_variant
from torchedge.exir.passes.view_to_copy import ViewToCopyPass
from torchedge.kernels.registry import register_kernel

__all__ = ["BoundPattern", "bind_pattern_to_op", "bound_patterns", "backend_namespaces", "QUANTIZED_NAMESPACES"]

# The namespaces of the quantized operators the backend dialect admits (ExecuTorch's, and
# torchedge's own for the variants it defines, `torchedge.exir.dialects.quantized`).
QUANTIZED_NAMESPACES = frozenset({"quantized_decomposed", QUANTIZED_NAMESPACE})


@dataclass(frozen=True)
class BoundPattern:
    """A pattern bound to a backend operator.

    ``graph`` is the pattern traced to Edge operators; ``op`` the functional backend operator,
    called with the matched values of the pattern's parameters of the same names; ``guard``,
    when given, sees those values (a graph node or a literal, by parameter name) and may decline.
    """

    graph: torch.fx.Graph
    op: torch._ops.OpOverload
    parameters: tuple[str, ...]
    guard: Callable[[dict], bool] | None = None

    @property
    def size(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op == "call_function")


_BOUND: list[BoundPattern] = []


def bound_patterns(namespaces=None) -> list[BoundPattern]:
    """The patterns bound so far (to operators of ``namespaces``, when given), largest first."""
    chosen = [p for p in _BOUND if namespaces is None or p.op.namespace in namespaces]
    return sorted(chosen, key=lambda p: -p.size)


def backend_namespaces() -> frozenset[str]:
    """The namespaces of operators bound to patterns, and the quantized ones."""
    return QUANTIZED_NAMESPACES | {p.op.namespace for p in _BOUND}


def bind_pattern_to_op(
    library: torch.library.Library,
    name_or_schema: str,
    *,
    kernel: Callable | None = None,
    shape: Callable | None = None,
    guard: Callable[[dict], bool] | None = None,
):
    """Decorator binding a pattern (a function of ``torch.ops.aten`` overloads, written as the
    Edge graph holds them) to the operator ``name_or_schema`` of ``library``.

    ``name_or_schema`` is the name of an operator the library defines (``"add_relu"``,
    ``"add_relu.default"``) or a schema to define (``"add_relu(Tensor x, Tensor y) -> Tensor"``).
    The pattern's parameters are arguments of the operator, by name. ``kernel`` is a NumPy kernel
    of the out variant for torchedge's runtime, with the contract of
    `torchedge.kernels.registry.register_kernel` (``shape`` is its shape function);
    ``guard(values)`` may decline a match.

    Example::

        lib = torch.library.Library("my_backend", "DEF")

        @bind_pattern_to_op(lib, "add_relu(Tensor x, Tensor y) -> Tensor")
        def add_relu(x, y):
            return torch.ops.aten.relu.default(torch.ops.aten.add.Tensor(x, y))
    """

    def decorate(pattern: Callable) -> Callable:
        op = _operator(library, name_or_schema)
        graph = _trace_pattern(pattern)
        parameters = tuple(inspect.signature(pattern).parameters)
        _check_parameters(pattern, op, parameters)
        if not any(op.has_kernel_for_dispatch_key(k) for k in _IMPLEMENTATION_KEYS):
            library.impl(_qualified_overload(op), pattern, "CompositeImplicitAutograd")
        out = _out_variant(library, op)
        if kernel is not None:
            register_kernel(op_name(out), shape=shape)(kernel)
        _BOUND.append(BoundPattern(graph, op, parameters, guard))
        return pattern

    return decorate


_IMPLEMENTATION_KEYS = (
    torch._C.DispatchKey.CompositeExplicitAutograd,
    torch._C.DispatchKey.CompositeImplicitAutograd,
    torch._C.DispatchKey.Meta,
    torch._C.DispatchKey.CPU,
)


def _operator(library: torch.library.Library, name_or_schema: str) -> torch._ops.OpOverload:
    text = name_or_schema.split("::")[-1]
    if "(" in text:
        library.define(text)
        text = text[: text.index("(")]
    name, _, overload = text.partition(".")
    packet = getattr(getattr(torch.ops, library.ns), name, None)
    if packet is None or (overload or "default") not in packet.overloads():
        raise ExportError(
            f"bind_pattern_to_op: library '{library.ns}' defines no operator '{text}': pass its schema "
            '("name(Tensor x, ...) -> Tensor") or define it first'
        )
    return getattr(packet, overload or "default")


def _qualified_overload(op: torch._ops.OpOverload) -> str:
    name = op._schema.name.split("::")[-1]
    return name if op._overloadname == "default" else f"{name}.{op._overloadname}"


def _check_parameters(pattern: Callable, op: torch._ops.OpOverload, parameters: tuple[str, ...]) -> None:
    arguments = {a.name: a for a in op._schema.arguments}
    unknown = [p for p in parameters if p not in arguments]
    if unknown:
        raise ExportError(
            f"bind_pattern_to_op: pattern '{pattern.__name__}' has parameter(s) {unknown} that operator "
            f"'{op_name(op)}' does not take (its arguments: {list(arguments)}); name them as the operator does"
        )
    keyword_only = [p for p in parameters if arguments[p].kwarg_only]
    if keyword_only:
        raise ExportError(
            f"bind_pattern_to_op: pattern '{pattern.__name__}' binds keyword-only argument(s) {keyword_only} "
            f"of operator '{op_name(op)}'; patterns bind positional arguments"
        )
    missing = [n for n, a in arguments.items() if n not in parameters and not a.has_default_value()]
    if missing:
        raise ExportError(
            f"bind_pattern_to_op: operator '{op_name(op)}' needs argument(s) {missing} that pattern "
            f"'{pattern.__name__}' does not bind"
        )


def _trace_pattern(pattern: Callable) -> torch.fx.Graph:
    """The pattern as an FX graph of Edge operators (views become their copies, as in Edge graphs)."""
    traced = torch.fx.symbolic_trace(pattern)
    for node in traced.graph.nodes:
        if node.op in ("call_method", "call_module") or (
            node.op == "call_function" and not isinstance(node.target, torch._ops.OpOverload)
        ):
            raise ExportError(
                f"bind_pattern_to_op: pattern '{pattern.__name__}' calls {node.target!r}; write patterns with "
                "ATen overloads as Edge graphs hold them (torch.ops.aten.add.Tensor, torch.ops.aten.relu.default)"
            )
    ViewToCopyPass()(traced)
    return traced.graph


def _out_variant(library: torch.library.Library, op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The operator's out variant, defined in ``library`` when it has none and returns one tensor."""
    try:
        return out_variant(op)
    except ExportError:
        pass
    returns = op._schema.returns
    if len(returns) != 1 or str(returns[0].type) != "Tensor":
        raise ExportError(
            f"bind_pattern_to_op: operator '{op_name(op)}' has no out variant; define one in library "
            f"'{library.ns}': an overload taking the same arguments and, keyword-only, one written tensor "
            'per result ("name.out(..., *, Tensor(a!) out0, Tensor(b!) out1) -> (Tensor(a!), Tensor(b!))")'
        ) from None
    overload = "out" if op._overloadname == "default" else f"{op._overloadname}_out"
    name = op._schema.name.split("::")[-1]
    library.define(f"{name}.{overload}{_out_signature(op._schema)}")
    library.impl(f"{name}.{overload}", _writing_into_out(op), "CompositeExplicitAutograd")
    return getattr(getattr(getattr(torch.ops, library.ns), name), overload)


def _out_signature(schema) -> str:
    """``(<the arguments>, *, Tensor(a!) out) -> Tensor(a!)``."""
    text = str(schema)
    arguments = text[text.index("(") + 1 : text.rindex(") ->")]
    keyword_only = any(a.kwarg_only for a in schema.arguments)
    separator = ", " if arguments else ""
    return f"({arguments}{separator}{'' if keyword_only else '*, '}Tensor(a!) out) -> Tensor(a!)"


def _writing_into_out(op: torch._ops.OpOverload) -> Callable:
    def run(*args, out, **kwargs):
        out.copy_(op(*args, **kwargs))
        return out

    return run
