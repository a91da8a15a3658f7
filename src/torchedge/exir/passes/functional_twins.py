"""Functionalized mutations (``aten::X_functional``) become calls of ``aten::X`` on fresh copies.

Export keeps ops such as ``_native_batch_norm_legit_functional`` (training-mode batch norm,
instance norm) and ``rrelu_with_noise_functional``: they return X's outputs followed by the
new values of the arguments X would mutate. ATen defines no out variant for them, but X has
one. Each mutated argument is cloned, X writes the clone in place, and the clone stands for
the updated value: the same results, with kernels the runtime has.
"""

from __future__ import annotations

import torch

from torchedge.exir.pass_base import PassBase, PassResult

__all__ = ["FunctionalTwinsPass", "mutating_twin"]


def mutating_twin(op) -> torch._ops.OpOverload | None:
    """``aten::X.default`` for ``aten::X_functional.default`` when X mutates arguments, else None."""
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    name = op.overloadpacket.__name__
    packet = getattr(torch.ops.aten, name.removesuffix("_functional"), None) if name.endswith("_functional") else None
    twin = getattr(packet, "default", None) if packet is not None else None
    if twin is None or not _mutated(twin):
        return None
    if len(op._schema.returns) != len(twin._schema.returns) + len(_mutated(twin)):
        return None
    return twin


def _mutated(op) -> list[int]:
    """Positions of the non-out arguments ``op`` writes."""
    return [
        i
        for i, a in enumerate(op._schema.arguments)
        if not a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
    ]


class FunctionalTwinsPass(PassBase):
    """The getitem reading an updated argument becomes the copy itself (it keeps its name, which
    the graph signature may use for a buffer mutation)."""

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        modified = False
        for node in list(graph.nodes):
            twin = mutating_twin(node.target) if node.op == "call_function" else None
            if twin is None:
                continue
            args = list(node.args) + [
                node.kwargs.get(a.name, a.default_value) for a in twin._schema.arguments[len(node.args) :]
            ]
            kept, positions = len(twin._schema.returns), _mutated(twin)
            readers = {user.args[1]: user for user in node.users}  # export reads outputs through getitem
            with graph.inserting_before(node):
                call = graph.call_function(twin, ())
                call.meta = {**node.meta, "val": node.meta["val"][0] if kept == 1 else tuple(node.meta["val"][:kept])}
            for k, position in enumerate(positions):
                copy = readers.pop(kept + k, None)
                if copy is None:
                    copy = graph.call_function(torch.ops.aten.clone.default, ())
                    copy.meta = {**args[position].meta}
                copy.target, copy.args = torch.ops.aten.clone.default, (args[position],)
                call.prepend(copy)
                args[position] = copy
            call.args = tuple(args)
            for index, reader in readers.items():
                if kept == 1:
                    reader.replace_all_uses_with(call)
                    graph.erase_node(reader)
                else:
                    reader.args = (call, index)
            graph.erase_node(node)
            modified = True
        return PassResult(graph_module, modified)
