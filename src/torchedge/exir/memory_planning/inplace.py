"""Let elementwise operators write their result over an input that dies there.

``y = relu(x)`` where ``relu`` is ``x``'s last use: ``y`` can take ``x``'s
exact bytes, so the pair needs one buffer, not two. Only operators whose
kernels are registered as correct when ``out`` aliases ``self`` (the trait
`OpTraits.inplace_safe`, tested kernel by kernel) qualify, and only when shape
and dtype are identical, so every element is read before the same element is written.
"""

from __future__ import annotations

import torch

from torchedge.exir.ir import op_name
from torchedge.exir.tensor_spec import TensorSpec
from torchedge.kernels.registry import op_traits, registered_operators

__all__ = ["INPLACE_SAFE_OPS", "is_inplace_safe", "share_inplace"]


def is_inplace_safe(op) -> bool:
    """Whether the kernel of the out-variant operator ``op`` is registered as correct with
    out aliasing self."""
    return isinstance(op, torch._ops.OpOverload) and op_traits(op_name(op)).inplace_safe


def _overload(name: str) -> torch._ops.OpOverload:
    """The PyTorch operator of a registered name (``aten::add.out`` -> ``torch.ops.aten.add.out``)."""
    namespace, qualified = name.split("::")
    packet, overload = qualified.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


# The operators `share_inplace` may write over their input, read from the kernel registry.
INPLACE_SAFE_OPS = frozenset(_overload(name) for name in registered_operators() if op_traits(name).inplace_safe)


def _spec(node) -> TensorSpec | None:
    spec = node.meta.get("spec") if isinstance(node, torch.fx.Node) else None
    return spec if isinstance(spec, TensorSpec) else None


def share_inplace(graph_module: torch.fx.GraphModule, excluded: set[int], safe_ops=INPLACE_SAFE_OPS) -> int:
    """Make eligible outputs share their dying input's storage (``spec.base``); returns how many.

    ``excluded`` holds ids of specs that must keep storage of their own
    (caller-supplied inputs and outputs).
    """
    nodes = list(graph_module.graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    last_use: dict[int, int] = {}
    for node in nodes:
        spec = _spec(node)
        if spec is not None:
            key = id(spec.placement_owner())
            end = max((position[u] for u in node.users), default=position[node])
            last_use[key] = max(last_use.get(key, -1), end)
    shared = 0
    for node in nodes:
        if node.op != "call_function" or node.target not in safe_ops or not node.args:
            continue
        src, out = _spec(node.args[0]), _spec(node)
        if src is None or out is None or out.base is not None:
            continue
        owner = src.placement_owner()
        if (
            owner.const
            or id(owner) in excluded
            or id(out) in excluded
            or src.shape != out.shape
            or src.dtype != out.dtype
            or owner.nbytes != out.nbytes
            or last_use.get(id(owner)) != position[node]
        ):
            continue
        out.base = owner
        last_use[id(owner)] = max(last_use[id(owner)], last_use.get(id(out), position[node]))
        shared += 1
    return shared
