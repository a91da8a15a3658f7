"""Let elementwise operators write their result over an input that dies there.

``y = relu(x)`` where ``relu`` is ``x``'s last use: ``y`` can take ``x``'s
exact bytes, so the pair needs one buffer, not two. Only operators whose
portable kernels are tested to be correct when ``out`` aliases ``self``
(`INPLACE_SAFE_OPS`) qualify, and only when shape and dtype are identical,
so every element is read before the same element is written.
"""

from __future__ import annotations

import torch

from torchedge.exir.tensor_spec import TensorSpec

__all__ = ["INPLACE_SAFE_OPS", "share_inplace"]

_aten = torch.ops.aten
INPLACE_SAFE_OPS = frozenset({
    _aten.relu.out, _aten.hardtanh.out, _aten.sigmoid.out, _aten.tanh.out, _aten.neg.out, _aten.exp.out,
    _aten.sqrt.out, _aten.rsqrt.out, _aten.abs.out, _aten.clamp.out,
    _aten.add.out, _aten.sub.out, _aten.mul.out, _aten.div.out,
    _aten.add.Scalar_out, _aten.sub.Scalar_out, _aten.mul.Scalar_out, _aten.div.Scalar_out,
    _aten.pow.Tensor_Scalar_out,
})


def _spec(node) -> TensorSpec | None:
    spec = node.meta.get("spec") if isinstance(node, torch.fx.Node) else None
    return spec if isinstance(spec, TensorSpec) else None


def share_inplace(graph_module: torch.fx.GraphModule, excluded: set[int],
                  safe_ops=INPLACE_SAFE_OPS) -> int:
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
            owner = id(spec.placement_owner())
            end = max((position[u] for u in node.users), default=position[node])
            last_use[owner] = max(last_use.get(owner, -1), end)
    shared = 0
    for node in nodes:
        if node.op != "call_function" or node.target not in safe_ops or not node.args:
            continue
        src, out = _spec(node.args[0]), _spec(node)
        if src is None or out is None or out.base is not None:
            continue
        owner = src.placement_owner()
        if (owner.const or id(owner) in excluded or id(out) in excluded
                or src.shape != out.shape or src.dtype != out.dtype or owner.nbytes != out.nbytes
                or last_use.get(id(owner)) != position[node]):
            continue
        out.base = owner
        last_use[id(owner)] = max(last_use[id(owner)], last_use.get(id(out), position[node]))
        shared += 1
    return shared
