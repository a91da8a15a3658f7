"""Kernel fusion of data movement: a chain of copies that only move elements (``permute_copy``,
``clone`` keeping the contiguous order, and ``view_copy`` to the same shape) becomes one ``permute_copy``
of the composed permutation.

Attention blocks export such chains: Hugging Face's ViT and BERT move the heads back with a
permute, a ``contiguous()`` clone and two more permutes (four full copies of the attention
output where one does). Each copy in the chain is a fresh tensor used only by the next, so
the chain's result is exactly one permutation of its input's elements. A ``clone`` of a fresh
result that nothing else reads (what ``dropout`` and ``contiguous()`` leave) is dropped.
"""

from __future__ import annotations

import torch

from torchedge.exir.passes.fusion_matching import is_call, is_static, meta_val, replace_with_fused

__all__ = ["COPIES", "collapse_copies"]

_aten = torch.ops.aten
_CONTIGUOUS = (None, torch.contiguous_format, torch.preserve_format)


COPIES = frozenset({_aten.permute_copy.default, _aten.clone.default, _aten.view_copy.default})


def _permutation(node: torch.fx.Node) -> list | None:
    """The permutation of ``node``'s input dims that gives its output, or None where the
    node is not a plain copy of a contiguous tensor."""
    val, source = meta_val(node), meta_val(node.args[0])
    if not (isinstance(val, torch.Tensor) and isinstance(source, torch.Tensor) and source.is_contiguous()):
        return None
    rank = val.dim()
    if node.target is _aten.permute_copy.default:
        return [d % rank for d in node.args[1]] if rank else []
    if node.target is _aten.view_copy.default:  # only a view to the (static) shape it has
        same = is_static(node) and is_static(node.args[0]) and tuple(val.shape) == tuple(source.shape)
        return list(range(rank)) if same else None
    return list(range(rank)) if node.kwargs.get("memory_format") in _CONTIGUOUS else None  # clone


def collapse_copies(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
    """Fold the copies that feed only ``node`` (a copy) into one ``permute_copy`` replacing it."""
    perm = _permutation(node)
    if perm is None:
        return False
    matched, source = [node], node.args[0]
    while is_call(source, *COPIES) and len(source.users) == 1:
        inner = _permutation(source)
        if inner is None:
            break
        perm = [inner[i] for i in perm]
        matched.append(source)
        source = source.args[0]
    if len(matched) == 1:
        return _drop_redundant_clone(graph, node)
    replace_with_fused(graph, node, _aten.permute_copy.default, (source, perm), matched)
    return True


def _drop_redundant_clone(graph: torch.fx.Graph, clone: torch.fx.Node) -> bool:
    """Remove a ``clone`` of a value nothing else reads: a fresh result, maybe through
    reshapes, each used only by the next (a clone of a buffer or an input stays: the original
    may change). A clone the program returns stays too."""
    if clone.target is not _aten.clone.default or any(user.op == "output" for user in clone.users):
        return False
    source = clone.args[0]
    while is_call(source, _aten.view_copy.default) and len(source.users) == 1:
        source = source.args[0]
    if not (
        isinstance(source, torch.fx.Node)
        and source.op == "call_function"
        and len(source.users) == 1
        and not is_call(source, *COPIES)
    ):
        return False
    clone.replace_all_uses_with(clone.args[0])
    graph.erase_node(clone)
    return True
