"""`TensorSpec`: what memory planning and the emitter know about one tensor."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from torchedge.exir.symbolic import decided, is_dynamic, is_unbounded, upper_bound, upper_bound_shape

__all__ = ["TensorSpec", "describable_by_dim_order"]


def contiguous_dim_order(rank: int) -> tuple[int, ...]:
    return tuple(range(rank))


@dataclass(eq=False)
class TensorSpec:
    """Shape, dtype and (after planning) placement of one tensor value.

    Specs are compared by identity: an out-variant node and the `alloc` node that
    provides its buffer share one spec object.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    dim_order: tuple[int, ...]
    const: bool = False
    mem_id: int | None = None
    mem_offset: int | None = None
    lifetime: list[int] = field(default_factory=lambda: [-1, -1])
    base: TensorSpec | None = None  # set for views: they own no bytes and share the base's
    dynamic: bool = False  # some dimension is symbolic: ``shape`` holds upper bounds (DYNAMIC_BOUND)
    state: str | None = None  # a mutable buffer's name: its bytes persist across runs, so nothing else reuses them
    # some dimension has no upper bound (only the data decides it): no planned memory, the runtime
    # allocates it (DYNAMIC_UNBOUND); ``shape`` holds 0 for such dimensions
    unbounded: bool = False

    def placement_owner(self) -> TensorSpec:
        """The spec whose bytes this tensor lives in (itself, or the root of a view chain)."""
        return self.base.placement_owner() if self.base is not None else self

    @classmethod
    def from_tensor(cls, t: torch.Tensor, const: bool = False) -> TensorSpec:
        """The spec of ``t``; symbolic dimensions take their upper bound (0 where they have none)."""
        if is_unbounded(t.shape):
            shape = tuple(0 if is_unbounded([s]) else upper_bound(s) for s in t.shape)
            return cls(shape, t.dtype, _dim_order_of(t), const=const, dynamic=True, unbounded=True)
        return cls(upper_bound_shape(t.shape), t.dtype, _dim_order_of(t), const=const, dynamic=is_dynamic(t))

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


def describable_by_dim_order(t: torch.Tensor) -> bool:
    """Dense, non-overlapping strides: some permutation of the dims is row-major (assumed
    where the strides depend on sizes only the data decides)."""
    return decided(lambda: _dense(t), otherwise=True)


def _dense(t: torch.Tensor) -> bool:
    if t.numel() == 0:  # no elements: any strides describe it
        return True
    expected = 1
    for dim in sorted(range(t.dim()), key=t.stride):
        if t.size(dim) != 1 and t.stride(dim) != expected:
            return False
        expected *= t.size(dim)
    return True


def _dim_order_of(t: torch.Tensor) -> tuple[int, ...]:
    if t.dim() == 4 and decided(
        lambda: not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last), otherwise=False
    ):
        return (0, 2, 3, 1)
    return contiguous_dim_order(t.dim())
