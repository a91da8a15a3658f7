"""Node builders by node kind: each turns one decoded node into a step of the execution plan.

A builder is ``build(node, ctx) -> step | None``: it reads the node's table (``node``, a
`schema.NODE_KINDS` instance), finds its values through ``ctx`` (a `graph.NodeContext`), checks
them, and returns a callable with no arguments that computes the output in place, or None when
the output is only a view of an input (``ctx.alias``). Builders register with `@builds`; the
`nodes_*` modules hold them by family.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["BUILDERS", "QUANTIZED_BUILDERS", "builds", "builds_quantized"]

BUILDERS: dict[str, Callable] = {}
QUANTIZED_BUILDERS: dict[str, Callable] = {}  # for nodes that read or write a quantized value


def builds(*kinds: str):
    """Registers the decorated function as the builder of each node kind in ``kinds``."""

    def decorate(fn: Callable) -> Callable:
        for kind in kinds:
            BUILDERS[kind] = fn
        return fn

    return decorate


def builds_quantized(*kinds: str):
    """Registers the decorated function as the builder of each node kind in ``kinds`` when the
    node reads or writes a quantized value (`nodes_quantized`)."""

    def decorate(fn: Callable) -> Callable:
        for kind in kinds:
            QUANTIZED_BUILDERS[kind] = fn
        return fn

    return decorate
