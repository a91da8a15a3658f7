"""The decomposition table of the core-ATen stage: torch.export's, with torchedge's own choices.

* Kept whole, for their own kernels: operators whose torch decomposition guards on tensor
  values (``take``: on its indices), which an exported program cannot do.
* Decomposed exactly into ATen: custom operators of ``torch.nn`` that have no out variant
  (the chunked ``linear_cross_entropy``), computed as linear then cross entropy in the
  accumulation dtype the call names.

`cached_cia_ops` spares each decomposition torch's walk over the dispatcher for the
CompositeImplicitAutograd operators it may keep (a sixth to a quarter of a small model's
`to_edge`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch.nn.modules import linear_cross_entropy

__all__ = ["decomposition_table", "cached_cia_ops", "decompose_for_kernel_set"]

_KEPT_WHOLE = (torch.ops.aten.take.default,)


def _chunked_loss(
    input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing, acc_dtype
):
    acc = acc_dtype or input.dtype
    bias = None if linear_bias is None else linear_bias.to(acc)
    logits = F.linear(input.to(acc), linear_weight.to(acc), bias)
    loss = F.cross_entropy(
        logits,
        target,
        None if weight is None else weight.to(acc),
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )
    return loss.to(input.dtype)


def _linear_cross_entropy(
    input,
    linear_weight,
    target,
    linear_bias,
    weight,
    reduction,
    ignore_index,
    label_smoothing,
    batch_chunk_size,
    acc_policy,
    acc_dtype,
    allow_retain_graph,
    compute_input_grad,
    compute_linear_weight_grad,
    compute_linear_bias_grad,
):
    loss = _chunked_loss(
        input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing, acc_dtype
    )
    # The other outputs are gradients saved for autograd's backward, which no inference program
    # reads (the public function returns the loss only): uncomputed, of the shapes the op gives them.
    return (
        loss,
        input.new_empty(input.shape if compute_input_grad else (0, 0)),
        input.new_empty(linear_weight.shape if compute_linear_weight_grad else (0, 0)),
        input.new_empty(linear_weight.shape[:-1] if compute_linear_bias_grad else (0,)),
    )


def _linear_cross_entropy_no_reduction(
    input, linear_weight, target, linear_bias, weight, ignore_index, batch_chunk_size, acc_policy, acc_dtype
):
    return _chunked_loss(input, linear_weight, target, linear_bias, weight, "none", ignore_index, 0.0, acc_dtype)


_DECOMPOSED = {
    linear_cross_entropy._linear_cross_entropy_batch_chunked._opoverload: _linear_cross_entropy,
    linear_cross_entropy._linear_cross_entropy_batch_chunked_no_reduction._opoverload: (
        _linear_cross_entropy_no_reduction
    ),
}


def decomposition_table() -> dict:
    table = torch.export.default_decompositions()
    for op in _KEPT_WHOLE:
        table.pop(op, None)
    table.update(_DECOMPOSED)
    return table


_CIA = threading.local()  # .ops: (number of registered operator names, torch's set for them)


def _valid_cia_ops(original):
    """torch's set of preservable CompositeImplicitAutograd operators, computed again only when
    operators have been registered since (a custom op library loaded between two exports)."""
    count = len(torch._C._dispatch_get_all_op_names())
    cached = getattr(_CIA, "ops", None)
    if cached is None or cached[0] != count:
        cached = _CIA.ops = (count, original())
    return set(cached[1])


@contextmanager
def cached_cia_ops():
    """Within the block, torch's ``run_decompositions`` reuses the CompositeImplicitAutograd
    operator set of the previous decomposition while no operator was registered since."""
    from torch._export import utils
    from torch.export import decomp_utils, exported_program

    modules = (utils, decomp_utils, exported_program)
    saved = [m._collect_all_valid_cia_ops for m in modules]
    original = getattr(utils._collect_all_valid_cia_ops, "__wrapped__", utils._collect_all_valid_cia_ops)

    def collect():
        return _valid_cia_ops(original)

    collect.__wrapped__ = original
    for module in modules:
        module._collect_all_valid_cia_ops = collect
    try:
        yield
    finally:
        for module, function in zip(modules, saved):
            module._collect_all_valid_cia_ops = function


# -- decompositions for a target kernel set -----------------------------------------------------
#
# torchedge's own runtime has kernels ExecuTorch's portable set lacks (``linalg_vector_norm``) and
# handles dtypes some of ExecuTorch's kernels do not (``_to_copy`` to or from complex). When
# `ExecutorchBackendConfig(kernel_set=...)` names another runtime's kernels, `decompose_for_kernel_set`
# rewrites such calls, on the functional edge graph, into operators that set has, as ExecuTorch's
# own compiler writes them.

_aten = torch.ops.aten


def _call(graph: torch.fx.Graph, meta: dict, target, *args, **kwargs) -> torch.fx.Node:
    """A new node calling ``target``, its ``val`` computed on the fake values of its arguments;
    the rest of its meta (source line, debug handle) is the replaced node's."""

    def fake(a):
        return a.meta["val"] if isinstance(a, torch.fx.Node) else a

    node = graph.call_function(target, args, kwargs)
    node.meta = {**meta, "val": target(*[fake(a) for a in args], **{k: fake(v) for k, v in kwargs.items()})}
    return node


def _vector_norm(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``linalg_vector_norm(x, ord, dim, keepdim, dtype)`` as abs, pow, sum, amax/amin and sqrt."""
    names = ("self", "ord", "dim", "keepdim", "dtype")
    defaults = {"ord": 2, "dim": None, "keepdim": False, "dtype": None}
    bound = {**defaults, **dict(zip(names, node.args)), **node.kwargs}
    x, order, keepdim, dtype = bound["self"], float(bound["ord"]), bool(bound["keepdim"]), bound["dtype"]
    val = x.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.is_complex() or not val.is_floating_point() and dtype is None:
        return None
    dim = bound["dim"]
    dims = [dim] if isinstance(dim, int) else list(dim) if dim else list(range(val.dim()))
    meta = node.meta
    if dtype is not None and dtype != val.dtype:
        x = _call(graph, meta, _aten._to_copy.default, x, dtype=dtype)
    if order == 0:
        nonzero = _call(graph, meta, _aten.ne.Scalar, x, 0)
        counted = _call(graph, meta, _aten._to_copy.default, nonzero, dtype=x.meta["val"].dtype)
        return _call(graph, meta, _aten.sum.dim_IntList, counted, dims, keepdim)
    if order == 2:
        squares = _call(graph, meta, _aten.mul.Tensor, x, x)
        total = _call(graph, meta, _aten.sum.dim_IntList, squares, dims, keepdim)
        return _call(graph, meta, _aten.sqrt.default, total)
    magnitude = _call(graph, meta, _aten.abs.default, x)
    if order == float("inf"):
        return _call(graph, meta, _aten.amax.default, magnitude, dims, keepdim)
    if order == float("-inf"):
        return _call(graph, meta, _aten.amin.default, magnitude, dims, keepdim)
    if order == 1:
        return _call(graph, meta, _aten.sum.dim_IntList, magnitude, dims, keepdim)
    powers = _call(graph, meta, _aten.pow.Tensor_Scalar, magnitude, order)
    total = _call(graph, meta, _aten.sum.dim_IntList, powers, dims, keepdim)
    return _call(graph, meta, _aten.pow.Tensor_Scalar, total, 1.0 / order)


def _complex_copy(graph: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``_to_copy`` to or from a complex dtype names its (contiguous) layout, so that it is written
    as ``dim_order_ops::_to_dim_order_copy``, as ExecuTorch's compiler writes every copy: that
    kernel handles complex values, ExecuTorch's ``aten::_to_copy`` does not."""
    source, result = node.args[0].meta.get("val"), node.meta.get("val")
    if not isinstance(result, torch.Tensor) or not isinstance(source, torch.Tensor):
        return None
    if not (source.is_complex() or result.is_complex()) or node.kwargs.get("memory_format") is not None:
        return None
    if not source.is_contiguous():
        return None
    return _call(
        graph, node.meta, _aten._to_copy.default, *node.args, **node.kwargs, memory_format=torch.contiguous_format
    )


# operator -> (whether a kernel set calls for the rewrite, rewrite); a rewrite returns None to keep the call.
_FOR_KERNEL_SET = {
    _aten.linalg_vector_norm.default: (lambda names: "aten::linalg_vector_norm.out" not in names, _vector_norm),
    _aten._to_copy.default: (lambda names: "dim_order_ops::_to_dim_order_copy.out" in names, _complex_copy),
}


def decompose_for_kernel_set(graph_module: torch.fx.GraphModule, kernel_set: Iterable[str] | None) -> bool:
    """Rewrite, in place, the calls of ``graph_module`` that the kernels of ``kernel_set`` (operator
    names such as ``"aten::add.out"``, as `ExecutorchBackendConfig.kernel_set`) cannot run into
    operators they can; True if any changed. ``None`` (torchedge's own runtime) changes nothing.
    """
    if kernel_set is None:
        return False
    names = frozenset(kernel_set)
    graph = graph_module.graph
    modified = False
    for node in list(graph.nodes):
        entry = _FOR_KERNEL_SET.get(node.target) if node.op == "call_function" else None
        if entry is None or not entry[0](names):
            continue
        with graph.inserting_before(node):
            replacement = entry[1](graph, node)
        if replacement is None:
            continue
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        modified = True
    if modified:
        graph_module.recompile()
    return modified
