"""Human-readable description of a `.pte`: methods, signatures, operators, memory.

Reads programs through the runtime's loader and metadata, so it needs no torch
(``torchedge inspect``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from torchedge.errors import BackendMissingError, TorchEdgeError
from torchedge.runtime.backend import get_backend
from torchedge.runtime.data_loader import loader_for
from torchedge.runtime.method_meta import MethodMeta, TensorMeta
from torchedge.runtime.tensor_view import dtype_of
from torchedge.schema.program import KernelCall, Tensor

__all__ = ["describe_program", "describe_memory"]


def _signature(items) -> str:
    parts = []
    for m in items:
        if isinstance(m, TensorMeta):
            dims = [f"<={d}" if m.dynamic else str(d) for d in m.shape]  # dynamic: upper bounds
            parts.append(f"{m.dtype}[{', '.join(dims)}]")
        else:
            parts.append(m.__name__)
    return ", ".join(parts) or "-"


def _constant_bytes(plan) -> tuple[int, int]:
    count = nbytes = 0
    for ev in plan.values or []:
        t = ev.val
        if isinstance(t, Tensor) and t.data_buffer_idx > 0 and t.allocation_info is None:
            count += 1
            nbytes += int(np.prod(t.sizes or [], dtype=np.int64)) * dtype_of(t.scalar_type, plan.name).itemsize
    return count, nbytes


def _delegate_lines(index: int, delegate, pte) -> list[str]:
    """A delegate's payload size and, where its backend describes payloads, what it holds."""
    payload = pte.delegate_data(delegate)
    lines = [f"  delegate {index} ({delegate.id}): {len(payload):,} bytes"]
    try:
        backend = get_backend(delegate.id)
    except BackendMissingError:
        return lines + ["    (backend not available here: contents not shown)"]
    try:
        return lines + [f"    {line}" for line in backend.describe(payload)]
    except TorchEdgeError as e:
        return lines + [f"    cannot read the payload: {e}"]


def describe_program(source) -> str:
    from torchedge.serialize import deserialize_pte

    loader = loader_for(source)
    pte = deserialize_pte(loader.data)
    program = pte.program
    lines = [
        f"file: {len(loader.data):,} bytes, {len(program.segments or [])} segment(s), "
        f"segment data {sum(s.size for s in program.segments or []):,} bytes"
    ]
    for plan in program.execution_plan or []:
        meta = MethodMeta.from_plan(plan)
        n_const, const_bytes = _constant_bytes(plan)
        instructions = plan.chains[0].instructions if plan.chains else []
        calls = Counter(
            meta.operators[i.instr_args.op_index] for i in instructions if isinstance(i.instr_args, KernelCall)
        )
        lines += [
            f"method '{meta.name}'",
            f"  inputs:  {_signature(meta.inputs)}",
            f"  outputs: {_signature(meta.outputs)}",
            f"  instructions: {meta.num_instructions}, values: {len(plan.values or [])}",
            f"  planned memory: {sum(meta.planned_buffer_sizes):,} bytes in buffers "
            f"{[f'{s:,}' for s in meta.planned_buffer_sizes]}",
            f"  constants: {n_const} tensors, {const_bytes:,} bytes",
            f"  delegates: {', '.join(d.id for d in plan.delegates or []) or 'none'}",
        ]
        for i, delegate in enumerate(plan.delegates or []):
            lines += _delegate_lines(i, delegate, pte)
        lines.append(f"  operators ({len(meta.operators)}):")
        lines += [f"    {calls.get(op, 0):5d} x {op}" for op in meta.operators]
    return "\n".join(lines)


def describe_memory(source, png: str | None = None) -> str:
    """Per method and memory id: planned size, lower bound, utilisation; optionally a PNG per plan."""
    from torchedge.runtime.memory_report import memory_report
    from torchedge.serialize import deserialize_pte

    pte = deserialize_pte(loader_for(source).data)
    lines = []
    for plan in pte.program.execution_plan or []:
        instructions = len(plan.chains[0].instructions) if plan.chains else 0
        lines.append(f"method '{plan.name}' ({instructions} instructions)")
        for usage in memory_report(plan):
            lines.append(
                f"  memory {usage.mem_id}: {usage.size:,} bytes planned, lower bound "
                f"{usage.lower_bound:,} bytes, utilisation {usage.utilisation:.1%}, "
                f"{len(usage.tensors)} tensors"
            )
            if png:
                from torchedge.devtools.memory_picture import save_plan

                path = (
                    png
                    if len(pte.program.execution_plan) == 1 and usage.mem_id == 1
                    else png.replace(".png", f"_{plan.name}_mem{usage.mem_id}.png")
                )
                save_plan(plan, usage, path)
                lines.append(f"    picture: {path}")
    return "\n".join(lines)
