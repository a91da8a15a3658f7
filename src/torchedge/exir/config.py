"""User-facing configuration of the two compilation stages."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass

__all__ = ["EdgeCompileConfig", "ExecutorchBackendConfig"]


@dataclass
class EdgeCompileConfig:
    """Options of `to_edge`.

    ``_check_ir_validity`` keeps ExecuTorch's spelling so that user scripts port unchanged.
    ``fold_constants`` evaluates subgraphs that depend only on weights and literals
    at compile time (for example weight transposes) and stores their results; inference
    batch norms after a convolution and even zero padding before it fold into it first.
    ``narrow_rows`` computes only the rows a select or slice reads (`NarrowRowsPass`): a ViT
    or BERT classifier runs its last block for the one token its head reads.
    """

    _check_ir_validity: bool = True
    fold_constants: bool = True
    narrow_rows: bool = True


@dataclass
class ExecutorchBackendConfig:
    """Options of `EdgeProgramManager.to_executorch`.

    passes: user passes run on each method's edge graph before the out-variant pass.
    memory_planning_pass: places every planned tensor; swap it to change the algorithm.
    segment_alignment / constant_tensor_alignment: byte alignment in the `.pte`.
    kernel_set: operator names (``"aten::add.out"``) the target runtime provides, for
      example those of a C++ ExecuTorch build; ``None`` means torchedge's own runtime.
      Operators the target lacks but can compute otherwise are rewritten for it first, as
      ExecuTorch's compiler writes them (`decompositions.decompose_for_kernel_set`: with
      ExecuTorch's kernels, ``linalg_vector_norm`` becomes abs/pow/sum/amax/amin/sqrt and copies
      to or from complex become ``dim_order_ops::_to_dim_order_copy``); compilation fails on
      any other operator the target lacks (``check_kernels=False`` skips that check).
    backend_set: backend ids the target runtime has; delegates to any other fail to compile.
    emit_stacktrace: write each instruction's source stack trace into the `.pte`.
    emit_mutable_buffer_names: name each mutable buffer in the `.pte` (``ExtraTensorInfo``).
    run_reinplace_pass: state updates write into the mutated buffer itself where that is exact
      (a KV-cache update costs the new rows); False keeps ExecuTorch's default, a write-back
      ``copy_`` of the whole buffer after the graph.
    fuse_kernels: fuse conv + batch norm + activation and attention into torchedge-private
      kernels (torchedge's runtime only; kernel_set must be None).
    external_constants: keep every constant tensor out of the `.pte`, by its fully qualified
      name, for a `.ptd` file (`ExecutorchProgramManager.write_tensor_data_to_file`), as
      ExecuTorch does; load the program with ``data_path=`` that file.
    """

    passes: list[Callable] = field(default_factory=list)
    memory_planning_pass: MemoryPlanningPass = field(default_factory=MemoryPlanningPass)
    extract_delegate_segments: bool = True
    segment_alignment: int = 128
    constant_tensor_alignment: int = 16
    kernel_set: Iterable[str] | None = None
    backend_set: Iterable[str] | None = None
    check_kernels: bool = True
    emit_stacktrace: bool = False
    emit_mutable_buffer_names: bool = False
    run_reinplace_pass: bool = True
    fuse_kernels: bool = False
    external_constants: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.kernel_set, Iterator):  # read more than once: by decomposition and the check
            self.kernel_set = tuple(self.kernel_set)
