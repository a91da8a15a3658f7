"""Human-readable description of a `.pte`: methods, signatures, operators, memory.

Reads programs through the runtime's loader and metadata, so it needs no torch
(``torchedge inspect``).
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np

from torchedge.errors import BackendMissingError, TorchEdgeError
from torchedge.runtime.backend import get_backend
from torchedge.runtime.data_loader import loader_for
from torchedge.runtime.method_meta import MethodMeta, TensorMeta
from torchedge.runtime.tensor_view import dtype_of
from torchedge.schema.program import KernelCall, Tensor, TensorDataLocation
from torchedge.serialize.ptd import read_ptd

__all__ = ["describe_program", "describe_memory", "external_constant_keys"]


def _signature(items) -> str:
    parts = []
    for m in items:
        if isinstance(m, TensorMeta):
            dims = [f"<={d}" if m.dynamic else str(d) for d in m.shape]  # dynamic: upper bounds
            parts.append(f"{m.dtype}[{', '.join(dims)}]")
        else:
            parts.append(m.__name__)
    return ", ".join(parts) or "-"


def _nbytes(t: Tensor, method: str) -> int:
    return int(np.prod(t.sizes or [], dtype=np.int64)) * dtype_of(t.scalar_type, method).itemsize


def _constants(plan) -> tuple[list[Tensor], dict[str, Tensor]]:
    """The method's constant tensors: (in the program, outside it for a .ptd: key -> tensor)."""
    inside: list[Tensor] = []
    outside: dict[str, Tensor] = {}
    for ev in plan.values or []:
        t = ev.val
        if not isinstance(t, Tensor) or t.allocation_info is not None:
            continue  # not a tensor, or planned memory (a mutable buffer starts from its value in the file)
        info = t.extra_tensor_info
        if info is not None and info.location == TensorDataLocation.EXTERNAL and info.fully_qualified_name:
            outside[info.fully_qualified_name] = t
        elif t.data_buffer_idx > 0:
            inside.append(t)
    return inside, outside


def external_constant_keys(program) -> list[str]:
    """The keys of the constants every method of ``program`` (a schema `Program`) keeps in a .ptd."""
    keys: dict[str, None] = {}
    for plan in program.execution_plan or []:
        keys.update(dict.fromkeys(_constants(plan)[1]))
    return list(keys)


def _constants_line(plan, program, external: dict[str, tuple[str, int]]) -> list[str]:
    """Where the method's constants are: the program's constant segment, an external .ptd by key;
    the delegates carry their own (in their payloads or in named data, shown below)."""
    inside, outside = _constants(plan)
    home = "constant segment" if program.constant_segment and program.constant_segment.offsets else "constant buffer"
    size_in = sum(_nbytes(t, plan.name) for t in inside)
    size_out = sum(_nbytes(t, plan.name) for t in outside.values())
    if not inside and not outside:
        tail = " (the delegates carry their weights: see below)" if plan.delegates else ""
        return [f"  constants: 0 tensors, 0 bytes{tail}"]
    where = []
    if inside:
        where.append((len(inside), size_in, f"in the program's {home}"))
    if outside:
        where.append((len(outside), size_out, "outside the program, by key in an external .ptd file"))
    total = f"  constants: {len(inside) + len(outside)} tensors, {size_in + size_out:,} bytes"
    if len(where) == 1:
        lines = [f"{total} {where[0][2]}"]
    else:
        lines = [f"{total}: " + "; ".join(f"{n} ({size:,} bytes) {place}" for n, size, place in where)]
    return lines + _external_lines(list(outside), external)


def _external_lines(keys: list[str], external: dict[str, tuple[str, int]]) -> list[str]:
    """Which data file holds each external key, and the keys no file given holds."""
    if not keys:
        return []
    missing = [k for k in keys if k not in external]
    files = Counter(external[k][0] for k in keys if k in external)
    lines = [f"    {n} key(s) in {name}" for name, n in files.items()]
    if missing:
        shown = ", ".join(missing[:8]) + (f", ... ({len(missing) - 8} more)" if len(missing) > 8 else "")
        lines.append(f"    {len(missing)} key(s) in no data file given (pass the .ptd with --data-path): {shown}")
    return lines


def _delegate_lines(index: int, delegate, pte) -> list[str]:
    """A delegate's payload size and, where its backend describes payloads, what it holds."""
    payload = pte.delegate_data(delegate)
    lines = [f"  delegate {index} ({delegate.id}): {len(payload):,} bytes"]
    try:
        backend = get_backend(delegate.id)
    except BackendMissingError as e:
        return lines + [f"    contents not shown: {e}"]
    try:
        return lines + [f"    {line}" for line in backend.describe(payload)]
    except TorchEdgeError as e:
        return lines + [f"    cannot read the payload: {e}"]


def _delegates_line(plan) -> str:
    """``XnnpackBackend x11, OnnxRuntimeBackend x1``: each backend once, with its count."""
    counts = Counter(d.id for d in plan.delegates or [])
    return ", ".join(name if n == 1 else f"{name} x{n}" for name, n in counts.items()) or "none"


def _data_files(data_paths) -> tuple[list[str], dict[str, tuple[str, int]]]:
    """A line per data file given, and where each key they hold is: key -> (file, bytes)."""
    lines, where = [], {}
    for path in data_paths:
        contents = read_ptd(loader_for(path).data, f"'{os.fspath(path)}'")
        size = sum(len(v) for v in contents.data.values())
        lines.append(f"data file {os.fspath(path)}: {len(contents.data)} key(s), {size:,} bytes")
        where.update({key: (os.path.basename(os.fspath(path)), len(v)) for key, v in contents.data.items()})
    return lines, where


def _named_data_line(program) -> list[str]:
    entries = program.named_data or []
    if not entries:
        return []
    size = sum(program.segments[e.segment_index].size for e in entries if e.segment_index < len(program.segments))
    return [
        f"named data: {len(entries)} key(s), {size:,} bytes in the program's segments (weights delegates find by key)"
    ]


def describe_program(source, data_paths=()) -> str:
    """The program's methods; ``data_paths``: the .ptd files that hold its external constants."""
    from torchedge.serialize import deserialize_pte

    loader = loader_for(source)
    pte = deserialize_pte(loader.data)
    program = pte.program
    files, external = _data_files(data_paths)
    lines = [
        f"file: {len(loader.data):,} bytes, {len(program.segments or [])} segment(s), "
        f"segment data {sum(s.size for s in program.segments or []):,} bytes",
        *files,
        *_named_data_line(program),
    ]
    for plan in program.execution_plan or []:
        lines += _method_lines(plan, pte, external)
    return "\n".join(lines)


def _method_lines(plan, pte, external: dict[str, tuple[str, int]]) -> list[str]:
    meta = MethodMeta.from_plan(plan)
    instructions = plan.chains[0].instructions if plan.chains else []
    calls = Counter(meta.operators[i.instr_args.op_index] for i in instructions if isinstance(i.instr_args, KernelCall))
    lines = [
        f"method '{meta.name}'",
        f"  inputs:  {_signature(meta.inputs)}",
        f"  outputs: {_signature(meta.outputs)}",
        f"  instructions: {meta.num_instructions}, values: {len(plan.values or [])}",
        f"  planned memory: {sum(meta.planned_buffer_sizes):,} bytes in buffers "
        f"{[f'{s:,}' for s in meta.planned_buffer_sizes]}",
        *_constants_line(plan, pte.program, external),
        f"  delegates: {_delegates_line(plan)}",
    ]
    for i, delegate in enumerate(plan.delegates or []):
        lines += _delegate_lines(i, delegate, pte)
    lines.append(f"  operators ({len(meta.operators)}):")
    return lines + [f"    {calls.get(op, 0):5d} x {op}" for op in meta.operators]


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
