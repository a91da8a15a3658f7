"""`Inspector`: what an ETDump says about a run, with ExecuTorch's names.

It reads ETDumps written by torchedge's runtime or by ExecuTorch's, groups their events into
`EventBlock`\\ s (timings per instruction over repeated runs), names each operator's source
line when given an ETRecord, and compares the logged intermediate outputs with eager
(`calculate_numeric_gap`, `first_divergence`: see `torchedge.devtools.numeric_gap`).

Reading an ETDump needs NumPy only, as profiling a `.pte` on a device does: torch is imported
by what needs it, an ETRecord and the comparisons with eager.

>>> from torchedge.devtools.event_blocks import PerfData
>>> PerfData([1.0, 2.0, 3.0]).p50
2.0
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from torchedge.devtools.event_blocks import TIME_SCALES, Event, EventBlock, event_blocks
from torchedge.errors import InputError
from torchedge.schema import etdump as ed
from torchedge.schema.program import DelegateCall
from torchedge.serialize.etdump import deserialize_etdump

if TYPE_CHECKING:
    from torchedge.devtools.numeric_gap import Divergence, GapRow, Reference

__all__ = ["Inspector", "OperatorStats", "delegate_backends", "representative_inputs"]

_COLUMNS = ["event_block_name", "event_name", "p10", "p50", "p90", "avg", "min", "max", "source"]


@dataclass
class OperatorStats:
    """One operator's calls over every run: how often, and how long per call."""

    operator: str
    calls: int
    total: float
    p10: float
    p50: float
    p90: float


def _unit(scale) -> str:
    return str(getattr(scale, "value", scale)).lower()


class Inspector:
    """``etdump_path`` or ``etdump_data``: the dump; ``debug_buffer_path``: the tensors it logged;
    ``etrecord``: an `ETRecord` or its path, for source lines and eager comparisons; times are
    read in ``source_time_scale`` and shown in ``target_time_scale`` (ns, us, ms or s).
    ``delegate_backends``: instruction id -> backend of each delegate call (`delegate_backends`
    reads it from the program), naming the delegates of a dump read without an ETRecord."""

    def __init__(
        self,
        etdump_path=None,
        etrecord=None,
        source_time_scale="ns",
        target_time_scale="ms",
        debug_buffer_path=None,
        *,
        etdump_data: bytes | None = None,
        debug_buffer_data: bytes | None = None,
        delegate_backends: Mapping[int, str] | None = None,
    ):
        if (etdump_path is None) == (etdump_data is None):
            raise InputError("give the Inspector one ETDump: etdump_path or etdump_data")
        if etdump_data is None:
            with open(etdump_path, "rb") as f:
                etdump_data = f.read()
        buffer = debug_buffer_data
        if debug_buffer_path is not None:
            with open(debug_buffer_path, "rb") as f:
                buffer = f.read()
        self.unit = _unit(target_time_scale)
        source, target = _unit(source_time_scale), self.unit
        self._etdump: ed.ETDump = deserialize_etdump(etdump_data)
        self._scale = _scale_factor(source, target)
        self.event_blocks: list[EventBlock] = event_blocks(self._etdump, buffer, "ns")
        for block in self.event_blocks:
            for event in block.events:
                if event.perf_data is not None:
                    event.perf_data.raw = [t * self._scale for t in event.perf_data.raw]
        self._etrecord = _load_etrecord(etrecord)
        if self._etrecord is not None:
            self._annotate()
            delegate_backends = delegate_backends or _recorded_backends(self._etrecord)
        self._name_delegates(delegate_backends or {})

    # -- sources -------------------------------------------------------------------

    def _reference(self, method_name: str, inputs=None) -> Reference:
        from torchedge.devtools.numeric_gap import reference_of

        if self._etrecord is None:
            raise InputError("comparing with eager needs an ETRecord: pass etrecord= to the Inspector")
        reference = reference_of(self._etrecord, method_name, need_inputs=inputs is None)
        if inputs is not None:
            reference.inputs = tuple(inputs)
        return reference

    def _annotate(self, method_name: str = "forward") -> None:
        from torchedge.devtools.numeric_gap import reference_of, user_source

        try:
            reference = reference_of(self._etrecord, method_name, need_inputs=False)
        except InputError:
            return
        nodes = {n.meta.get("debug_handle"): n for n in reference.program.graph.nodes if n.op == "call_function"}
        for event in self._execute_events():
            handle = _handle_at(reference.instruction_handles, event.instruction_id)
            node = nodes.get(handle)
            if node is None:
                continue
            event.debug_handles = (handle,)
            event.op_types = [str(node.target)]
            event.stack_traces = {node.name: node.meta.get("stack_trace") or ""}
            event.source = user_source(node)
            event.module_hierarchy = [path for path, _ in (node.meta.get("nn_module_stack") or {}).values()]

    def _name_delegates(self, backends: Mapping[int, str]) -> None:
        """Give each delegate call, and each delegate's own events, its backend's name."""
        for event in self._execute_events():
            if event.is_delegated_op and event.instruction_id in backends:
                event.delegate_backend_name = backends[event.instruction_id]

    def _execute_events(self) -> list[Event]:
        return [e for b in self.event_blocks if b.name == "Execute" for e in b.events if e.instruction_id is not None]

    def _runtime_outputs(self) -> dict[int, object]:
        """The values each instruction wrote in the last recorded run."""
        blocks = [b for b in self.event_blocks if b.name == "Execute"]
        if not blocks:
            raise InputError("the ETDump holds no run (no Execute block)")
        outputs = {
            e.instruction_id: e.debug_data[-1]
            for e in blocks[-1].events
            if e.debug_data and e.instruction_id is not None
        }
        if not outputs:
            raise InputError(
                "the ETDump logged no intermediate outputs: load the program with enable_etdump=True and a "
                "debug_buffer_size, and pass debug_buffer_path to the Inspector"
            )
        return outputs

    # -- numeric debugging -----------------------------------------------------------

    def calculate_numeric_gap(self, distance: str = "MSE", method_name: str = "forward", inputs=None):
        """Each logged instruction's output against eager's (MSE, L1 or SNR), as ExecuTorch's columns:
        a pandas DataFrame when pandas is installed, otherwise a list of `GapRow`. Eager runs on the
        ETRecord's representative inputs unless given the run's ``inputs``."""
        rows = self.numeric_gap_rows(distance, method_name, inputs)
        try:
            import pandas as pd
        except ImportError:
            return rows
        return pd.DataFrame([vars(r) for r in rows])

    def numeric_gap_rows(self, distance: str = "MSE", method_name: str = "forward", inputs=None) -> list[GapRow]:
        """`calculate_numeric_gap` as a list of `GapRow`."""
        from torchedge.devtools.numeric_gap import numeric_gaps

        return numeric_gaps(self._reference(method_name, inputs), self._runtime_outputs(), distance)

    def first_divergence(self, method_name: str = "forward", inputs=None) -> Divergence | None:
        """The first instruction whose kernel disagrees with eager on the same inputs (None: all agree)."""
        from torchedge.devtools.numeric_gap import first_divergence

        return first_divergence(self._reference(method_name, inputs), self._runtime_outputs())

    # -- profiles --------------------------------------------------------------------

    def operator_stats(self, skip_runs: int = 0, inside_delegates: bool = False) -> list[OperatorStats]:
        """Per operator (and per delegate call: each delegate is a row), over every call in every run
        but the first ``skip_runs`` (warm-up), slowest total first; ``inside_delegates``: the
        delegates' own events instead."""
        times: dict[str, list[float]] = {}
        first = 0  # the index of the block's first run among all runs
        for block in (b for b in self.event_blocks if b.name == "Execute"):
            keep = max(skip_runs - first, 0)
            for event in block.events:
                internal = event.delegate_debug_identifier is not None
                if event.instruction_id is not None and event.perf_data is not None and internal == inside_delegates:
                    times.setdefault(event.operator or event.label, []).extend(event.perf_data.raw[keep:])
            first += block.runs
        stats = [
            OperatorStats(name, len(t), sum(t), *(float(np.percentile(t, q)) for q in (10, 50, 90)))
            for name, t in times.items()
            if t
        ]
        return sorted(stats, key=lambda s: -s.total)

    def _rows(self) -> list[list]:
        rows = []
        for block in self.event_blocks:
            for event in block.events:
                perf = event.perf_data
                timings = [perf.p10, perf.p50, perf.p90, perf.avg, perf.min, perf.max] if perf else [None] * 6
                rows.append([block.name, event.label, *timings, event.source or ""])
        return rows

    def _columns(self, include_units: bool) -> list[str]:
        unit = f" ({self.unit})" if include_units else ""
        return [c + unit if c in ("p10", "p50", "p90", "avg", "min", "max") else c for c in _COLUMNS]

    def to_dataframe(self, include_units: bool = True):
        """The events as a pandas DataFrame, one row per event of each block (needs pandas); a
        delegate's events are named with their backend and instruction (`Event.label`)."""
        try:
            import pandas as pd
        except ImportError:
            raise InputError("to_dataframe needs pandas: pip install pandas") from None
        return pd.DataFrame(self._rows(), columns=self._columns(include_units))

    def print_data_tabular(self, file=None, include_units: bool = True) -> None:
        """Print every event of every block as a table."""
        columns = self._columns(include_units)
        cells = [[_cell(v) for v in row] for row in self._rows()]
        widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)]
        out = io.StringIO()
        out.write("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip() + "\n")
        for row in cells:
            out.write("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")
        (file or sys.stdout).write(out.getvalue())


def _cell(value) -> str:
    if value is None:
        return ""
    return f"{value:.6f}" if isinstance(value, float) else str(value)


def _scale_factor(source: str, target: str) -> float:
    for unit in (source, target):
        if unit not in TIME_SCALES:
            raise InputError(f"unknown time scale {unit!r}: use one of {', '.join(TIME_SCALES)}")
    return TIME_SCALES[source] / TIME_SCALES[target]


def _handle_at(handles, instruction_id: int | None):
    if instruction_id is None or not 0 <= instruction_id < len(handles):
        return None
    handle = handles[instruction_id]
    return handle[0] if isinstance(handle, (list, tuple)) and handle else handle


def _load_etrecord(etrecord):
    """An `ETRecord` as given, or parsed from its path."""
    if not isinstance(etrecord, (str, bytes, os.PathLike)):
        return etrecord
    from torchedge.devtools.etrecord import parse_etrecord

    return parse_etrecord(etrecord)


def representative_inputs(etrecord, method_name: str = "forward") -> tuple:
    """The inputs an ETRecord recorded for a method (a typed error when it has none)."""
    from torchedge.devtools.numeric_gap import reference_of

    return reference_of(etrecord, method_name).inputs


def delegate_backends(plan) -> dict[int, str]:
    """Instruction id -> backend id of each delegate call of a program's `ExecutionPlan`."""
    instructions = plan.chains[0].instructions if plan.chains else []
    return {
        pc: plan.delegates[instruction.instr_args.delegate_index].id
        for pc, instruction in enumerate(instructions)
        if isinstance(instruction.instr_args, DelegateCall)
    }


def _recorded_backends(etrecord, method_name: str = "forward") -> dict[int, str]:
    """Instruction id -> backend id of each delegate call, from an ETRecord's delegate map."""
    calls = (getattr(etrecord, "_delegate_map", None) or {}).get(method_name) or {}
    return {int(pc): delegate.get("name", "") for pc, delegate in calls.items()}
