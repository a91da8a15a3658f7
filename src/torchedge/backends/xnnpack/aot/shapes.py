"""Shapes of Edge values as the XNNPACK lowering writes them: static dims as they are, dynamic
dims (``torch.export`` symbols) at their upper bound, as ExecuTorch writes them; XNNPACK's
runtime reshapes the graph to each call's input shapes within those bounds."""

from __future__ import annotations

import torch

from torchedge.errors import ExportError

__all__ = [
    "FLOAT_TYPES",
    "any_dims",
    "dynamic_dims",
    "float_tensor",
    "leading_only",
    "one_inferred",
    "reshape_dims",
    "shape",
    "upper_bound",
]

FLOAT_TYPES = (torch.float32, torch.float16)
_MAX_DIMS = 6  # XNN_MAX_TENSOR_DIMS


def upper_bound(dim) -> int | None:
    """``dim`` itself when static; a symbol's finite upper bound; else None."""
    if isinstance(dim, int):
        return dim
    node = getattr(dim, "node", None)
    if node is None or getattr(node, "shape_env", None) is None:
        return None
    upper = node.shape_env.bound_sympy(node.expr).upper
    return int(upper) if upper.is_finite else None


def _value(node: torch.fx.Node):
    val = node.meta["val"]
    return val[0] if isinstance(val, (list, tuple)) else val


def shape(node: torch.fx.Node) -> tuple[int, ...]:
    """``node``'s dims, dynamic ones at their upper bound."""
    dims = tuple(upper_bound(d) for d in _value(node).shape)
    if any(d is None for d in dims):
        raise ExportError(
            f"XNNPACK lowering: node '{node.name}' has a dim with no upper bound ({list(_value(node).shape)}); "
            "export it with a Dim(..., max=N)"
        )
    return dims  # type: ignore[return-value]


def dynamic_dims(node: torch.fx.Node) -> set[int]:
    """The positions of ``node``'s dynamic dims."""
    val = node.meta.get("val")
    val = val[0] if isinstance(val, (list, tuple)) else val
    if not isinstance(val, torch.Tensor):
        return set()
    return {i for i, d in enumerate(val.shape) if not isinstance(d, int)}


def float_tensor(val) -> bool:
    """A float32 or float16 tensor of at most 6 dims, each static or bounded, none empty."""
    if not isinstance(val, torch.Tensor) or val.dtype not in FLOAT_TYPES or val.dim() > _MAX_DIMS:
        return False
    dims = [upper_bound(d) for d in val.shape]
    return all(d is not None and d > 0 for d in dims)


def any_dims(node: torch.fx.Node) -> bool:
    """For translations whose nodes take their shapes from their inputs at run time."""
    return True


def leading_only(node: torch.fx.Node) -> bool:
    """Dynamic dims only in the first position (a batch), in the result and every input."""
    return all(dynamic_dims(n) <= {0} for n in (node, *node.all_input_nodes))


def one_inferred(node: torch.fx.Node) -> bool:
    """At most one dynamic dim in the result: XNNPACK's reshape infers it (a 0 in ``new_shape``)
    from the input's size at run time."""
    return len(dynamic_dims(node)) <= 1


def reshape_dims(node: torch.fx.Node) -> list[int]:
    """``node``'s dims as a reshape's ``new_shape``: its dynamic dim (at most one) as 0."""
    dynamic = dynamic_dims(node)
    return [0 if i in dynamic else d for i, d in enumerate(shape(node))]
