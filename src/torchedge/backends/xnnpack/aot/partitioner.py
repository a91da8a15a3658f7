"""`XnnpackPartitioner` and `XnnpackBackend`: the AOT half of ExecuTorch's XNNPACK delegate.

The partitioner tags every maximal group of nodes that `lowering.is_supported` accepts (float32,
static shapes, the operator's own constraints); everything else stays on portable kernels.
``XnnpackBackend.preprocess`` lowers one partition to a payload ExecuTorch's runtime loads
under the same backend id.
"""

from __future__ import annotations

import operator
import time

from torch.export import ExportedProgram

# The translations register themselves on import.
from torchedge.backends.xnnpack.aot import ops_elementwise, ops_nn, ops_shape  # noqa: F401
from torchedge.backends.xnnpack.aot.lowering import is_supported, lower_program
from torchedge.errors import ExportError
from torchedge.exir.backend import (
    BackendDetails,
    CompileSpec,
    DelegationSpec,
    Partitioner,
    PartitionResult,
    PreprocessResult,
    tag_supported_partitions,
)
from torchedge.exir.backend.partitioner import TAG_KEY
from torchedge.exir.passes.mutable_state import mutations

__all__ = ["BACKEND_ID", "XnnpackBackend", "XnnpackPartitioner"]

BACKEND_ID = "XnnpackBackend"


class XnnpackBackend(BackendDetails):
    """Lowers a partition to an XNNPACK graph payload (constants inside the payload)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return PreprocessResult(processed_bytes=lower_program(edge_program), debug_handle_map={})


class XnnpackPartitioner(Partitioner):
    """Delegate every maximal group of float32 operators the XNNPACK lowering handles.

    ExecuTorch's knobs that apply: ``per_op_mode`` (each operator a delegate of its own) and
    ``config_precisions`` (only float32 is lowered so far: anything else is an `ExportError`);
    ``verbose`` prints what was tagged and how long it took.
    """

    def __init__(self, config_precisions=None, per_op_mode: bool = False, verbose: bool = False):
        precisions = config_precisions if isinstance(config_precisions, (list, tuple)) else [config_precisions]
        names = {getattr(p, "name", str(p)).upper() for p in precisions if p is not None}
        if names - {"FP32"}:
            raise ExportError(
                f"XnnpackPartitioner: config_precisions {sorted(names)}: torchedge lowers float32 only so far "
                "(quantized precisions: lower with ExecuTorch's XnnpackPartitioner, torchedge runs the .pte)"
            )
        self.per_op_mode = per_op_mode
        self.verbose = verbose
        self.delegation_spec = DelegationSpec(BACKEND_ID, [])

    def supported_operators(self) -> set[str] | None:
        return None

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        start = time.perf_counter()
        # State updates stay portable, where they write into the buffer itself.
        updates = {m.value for m in mutations(exported_program.graph_signature)}
        gm = exported_program.graph_module

        def supported(node) -> bool:
            return node.name not in updates and is_supported(node, exported_program)

        if self.per_op_mode:
            tags = self._per_op(gm, supported)
        else:
            tags = tag_supported_partitions(gm, supported, self.delegation_spec, prefix="xnnpack_")
        if self.verbose:
            tagged = sum(1 for n in gm.graph.nodes if TAG_KEY in n.meta)
            print(f"XnnpackPartitioner: {tagged} nodes in {len(tags)} partitions ({time.perf_counter() - start:.3f} s)")
        return PartitionResult(exported_program, tags)

    def _per_op(self, gm, supported) -> dict[str, DelegationSpec]:
        tags: dict[str, DelegationSpec] = {}
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is not operator.getitem and supported(node):
                tag = f"xnnpack_{len(tags)}"
                node.meta[TAG_KEY] = tag
                for user in node.users:
                    if user.op == "call_function" and user.target is operator.getitem:
                        user.meta[TAG_KEY] = tag
                tags[tag] = self.delegation_spec
        return tags
