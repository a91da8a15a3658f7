"""Dynamic dimensions from the command line, and example inputs of other sizes along them.

Parsing needs no torch (the CLI parses before it knows whether torch is needed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchedge.errors import ExportError

if TYPE_CHECKING:
    import torch

__all__ = ["DynamicDim", "parse_dynamic", "dynamic_shapes", "resize_along"]


@dataclass(frozen=True)
class DynamicDim:
    """Dimension ``dim`` of input ``input`` may take any size in [``min``, ``max``]."""

    input: int
    dim: int
    min: int
    max: int


def parse_dynamic(spec: str) -> DynamicDim:
    """``"INPUT:DIM:MIN:MAX"``, e.g. ``"0:1:2:128"`` (input 0, dim 1, sizes 2 to 128)."""
    try:
        parsed = DynamicDim(*(int(part) for part in spec.split(":")))
    except (TypeError, ValueError):
        raise ExportError(f"dynamic dimension '{spec}' is not INPUT:DIM:MIN:MAX, e.g. 0:1:2:128") from None
    if not 0 <= parsed.min <= parsed.max:
        raise ExportError(f"dynamic dimension '{spec}': need 0 <= MIN <= MAX")
    return parsed


def dynamic_shapes(dims: list[DynamicDim], num_inputs: int) -> tuple | None:
    """The ``dynamic_shapes`` argument of `torch.export.export` for positional inputs."""
    import torch

    if not dims:
        return None
    spec: list[dict] = [{} for _ in range(num_inputs)]
    for d in dims:
        if not 0 <= d.input < num_inputs:
            raise ExportError(f"dynamic dimension of input {d.input}: the model takes {num_inputs} input(s)")
        spec[d.input][d.dim] = torch.export.Dim(f"input{d.input}_dim{d.dim}", min=d.min, max=d.max)
    return tuple(spec)


def resize_along(tensor: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """``tensor`` cut or tiled along ``dim`` to ``size`` (inputs of another size, same kind of data)."""
    reps = [1] * tensor.dim()
    reps[dim] = -(-size // tensor.shape[dim])
    return tensor.repeat(*reps).narrow(dim, 0, size).contiguous()
