"""Runtime half of the XNNPACK backend: ExecuTorch's ``XnnpackBackend`` payloads run in NumPy.

``init`` splits the payload (`header`), decodes its graph (`payload_tables`) and lays it out as
an execution plan (`graph`); ``execute`` runs the plan on the delegate call's arguments. No
XNNPACK library and no torch: NumPy only. Importing this module registers the backend under
ExecuTorch's id, ``XnnpackBackend``.

Threads: a handle (`Plan`) owns the buffers of its graph's values (and shares its workspace with
the other handles of its method), so it runs one call at a time, which the lock of the method
holding it ensures; each loaded method builds handles of its own, and the constants they share
are read-only. A call holds the native pools its products run on
(BLAS) at the runtime's thread count (`RUNTIME_NUM_THREADS`, one by default), as the runtime
holds them for its kernels: a fully delegated method runs no kernel that would.

Workspace: the delegates of one method share one arena for their intermediate values
(`init_method`), as ExecuTorch's XNNPACK runtime can share a workspace between the delegates of a
model. The method runs them one at a time under its lock, and no intermediate value outlives the
call that computes it (each step writes its whole output before a later step reads it), so every
delegate lays its values out from the arena's start and a run touches the same bytes in each
delegate. The arena holds the largest plan's values; the values a caller reads (outputs, in the
method's memory, or copies) never lie in it, and each loaded method has an arena of its own.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from torchedge.backends.xnnpack import (  # noqa: F401
    nodes_elementwise,
    nodes_linear_conv,
    nodes_pooling,
    nodes_quantized,
    nodes_quantized_unary,
    nodes_shape,
)
from torchedge.backends.xnnpack.graph import build_plan
from torchedge.backends.xnnpack.header import split_payload
from torchedge.backends.xnnpack.payload_tables import decode_graph
from torchedge.backends.xnnpack.plan import Plan
from torchedge.runtime.backend import BackendInterface, register_backend
from torchedge.runtime.threads import DEFAULT_NUM_THREADS, RUNTIME_NUM_THREADS, ThreadLimit, decode_num_threads

__all__ = ["BACKEND_ID", "XnnpackBackend"]

BACKEND_ID = "XnnpackBackend"


class XnnpackBackend(BackendInterface):
    """Interprets XNNPACK delegate graphs; compile specs carry nothing it needs.

    ``share_workspace``: the delegates of a method lay their intermediate values out in one arena
    (`init_method`); False: each plan keeps buffers of its own."""

    def __init__(self, share_workspace: bool = True):
        self.share_workspace = share_workspace

    def init(self, processed, compile_specs, named_data) -> Plan:
        flatbuffer, constant_data = split_payload(processed)
        plan = build_plan(decode_graph(flatbuffer), constant_data, named_data)
        threads = compile_specs.get(RUNTIME_NUM_THREADS)
        plan.threads = ThreadLimit(DEFAULT_NUM_THREADS if threads is None else decode_num_threads(threads))
        return plan

    def init_method(self, handles: list[Plan]) -> None:
        """Gives the delegates of one method one workspace, sized for the largest of their plans;
        the plans they lay out from the first call on (in the call's arrays, or for other input
        shapes) put their intermediate values there."""
        if not self.share_workspace or not handles:
            return
        workspace = np.zeros(max(plan.scratch_bytes for plan in handles), np.uint8)
        for plan in handles:
            plan.workspace = workspace

    def execute(self, handle: Plan, args) -> dict:  # resized outputs, see Plan.run
        """Runs the delegate; returns the outputs whose shape differs from their argument's (a
        payload with dynamic dims run at other shapes), by argument position, for the runtime
        to resize those arguments to (see `Plan.run`)."""
        if handle.threads is None:
            return handle.run(args)
        with handle.threads:
            return handle.run(args)

    def input_count(self, handle: Plan) -> int:
        """The payload's external inputs lead the arguments; `Plan.run` writes each output whole
        (its node's result in place, or a copy of the value) and never reads one first."""
        return len(handle.inputs)

    def describe(self, processed) -> list[str]:
        """Nodes by kind, values, and the constants the payload holds or names."""
        flatbuffer, constant_data = split_payload(processed)
        graph = decode_graph(flatbuffer)
        kinds = Counter(type(node.xnode_union).__name__ for node in graph.xnodes or [])
        constants = [c for c in graph.constant_data or [] if c.named_key or c.size]  # entry 0 is empty
        named = [c for c in constants if c.named_key]
        inline = sum(c.size for c in constants if not c.named_key)
        lines = [
            f"XNNPACK graph: {len(graph.xnodes or [])} nodes, {len(graph.xvalues or [])} values, "
            f"inputs {list(graph.input_ids or [])}, outputs {list(graph.output_ids or [])}",
            f"weights: {len(named)} by key in named data (the program's segments or a .ptd), "
            f"{len(constants) - len(named)} in the payload ({inline:,} bytes)",
        ]
        return lines + [f"{count:5d} x {kind}" for kind, count in kinds.most_common()]


register_backend(BACKEND_ID, XnnpackBackend())
