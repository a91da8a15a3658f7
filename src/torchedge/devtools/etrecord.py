"""ETRecord: what the compiler knew, saved so that a run's events can be named and checked later.

The file is ExecuTorch's (a zip with an ``ETRECORD_V0`` marker, programs in ExecuTorch's serde
JSON, JSON maps, ``torch.save`` tensors), so ExecuTorch's ``parse_etrecord`` and ``Inspector``
read what torchedge writes, and `parse_etrecord` reads what ExecuTorch writes. Programs read
back are torch ``ExportedProgram``\\ s with ATen targets (ExecuTorch's Edge operators are mapped
to the ATen overloads they wrap: see `torchedge.devtools.etrecord_serde`).

Record one while compiling::

    edge = to_edge(torch.export.export(model, inputs), generate_etrecord=True)
    et = edge.to_executorch()
    et.get_etrecord().save("model.etrecord")

The maps have ExecuTorch's shapes, per method: ``_debug_handle_map`` instruction id -> the Edge
node's debug handle (a list of handles for a delegate call), ``_delegate_map`` instruction id ->
``{"name": backend id, "delegate_map": the backend's map}``, ``_instruction_id_to_num_outs_map``
instruction id -> output count of a delegate call. In memory the ids are ints; JSON makes them
strings in a parsed record, as in ExecuTorch.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from typing import IO

import torch
from torch.export import ExportedProgram

from torchedge.devtools.etrecord_serde import SerializedProgram, deserialize_program, serialize_program
from torchedge.errors import ExportError, InvalidProgramError
from torchedge.schema.program import DelegateCall

__all__ = ["ETRecord", "ETRecordReservedFileNames", "generate_etrecord", "parse_etrecord"]


class ETRecordReservedFileNames:
    """The zip entry names ExecuTorch reserves (its ``ETRecordReservedFileNames``)."""

    ETRECORD_IDENTIFIER = "ETRECORD_V0"
    EXPORTED_PROGRAM = "exported_program"
    EXPORT_GRAPH_ID = "export_graph_id"
    EDGE_DIALECT_EXPORTED_PROGRAM = "edge_dialect_exported_program"
    ET_DIALECT_GRAPH_MODULE = "et_dialect_graph_module"
    DEBUG_HANDLE_MAP_NAME = "debug_handle_map"
    DELEGATE_MAP_NAME = "delegate_map"
    INSTRUCTION_ID_TO_NUM_OUTS_MAP_NAME = "instruction_id_to_num_outs_map"
    REFERENCE_OUTPUTS = "reference_outputs"
    REPRESENTATIVE_INPUTS = "representative_inputs"

    @classmethod
    def all(cls) -> list[str]:
        return [v for k, v in vars(cls).items() if k.isupper()]


_NAMES = ETRecordReservedFileNames
_PIECES = ("_state_dict", "_constants", "_example_inputs")
_JSON_MAPS = {
    _NAMES.DEBUG_HANDLE_MAP_NAME: "_debug_handle_map",
    _NAMES.DELEGATE_MAP_NAME: "_delegate_map",
    _NAMES.INSTRUCTION_ID_TO_NUM_OUTS_MAP_NAME: "_instruction_id_to_num_outs_map",
    _NAMES.EXPORT_GRAPH_ID: "export_graph_id",
}
_TENSORS = {_NAMES.REFERENCE_OUTPUTS: "_reference_outputs", _NAMES.REPRESENTATIVE_INPUTS: "_representative_inputs"}


class ETRecord:
    """The record; build it with ``generate_etrecord=True`` (then ``get_etrecord()``), with
    `generate_etrecord`, or with the ``add_*`` methods; read one with `parse_etrecord`."""

    def __init__(
        self,
        exported_program: ExportedProgram | None = None,
        export_graph_id: int | None = None,
        edge_dialect_program: ExportedProgram | dict[str, ExportedProgram] | None = None,
        graph_map: dict[str, ExportedProgram] | None = None,
        _debug_handle_map: dict | None = None,
        _delegate_map: dict | None = None,
        _instruction_id_to_num_outs_map: dict | None = None,
        _reference_outputs: dict | None = None,
        _representative_inputs: list | None = None,
    ):
        self.exported_program = exported_program
        self.export_graph_id = export_graph_id
        self.edge_dialect_program = edge_dialect_program
        self.graph_map = graph_map
        self._debug_handle_map = _debug_handle_map
        self._delegate_map = _delegate_map
        self._instruction_id_to_num_outs_map = _instruction_id_to_num_outs_map
        self._reference_outputs = _reference_outputs
        self._representative_inputs = _representative_inputs

    # -- building ------------------------------------------------------------------

    def add_exported_program(self, exported_program: ExportedProgram | dict[str, ExportedProgram] | None) -> None:
        """Record torch.export's program (of ``forward`` when given one per method)."""
        if self.exported_program is not None or self.export_graph_id is not None:
            raise ExportError("the ETRecord already holds an exported program; it records one")
        program = exported_program.get("forward") if isinstance(exported_program, dict) else exported_program
        if program is not None:
            self.exported_program, self.export_graph_id = program, id(program.graph)

    def add_edge_dialect_program(self, edge_dialect_program) -> None:
        """Record the Edge program: an `EdgeProgramManager` (one program per method) or an `ExportedProgram`."""
        if self.edge_dialect_program is not None:
            raise ExportError("the ETRecord already holds an Edge program; it records one")
        self.edge_dialect_program = _edge_programs(edge_dialect_program)

    def add_extra_export_modules(self, modules: dict) -> None:
        """Record more graphs under user names (``name/method`` in ``graph_map``)."""
        graph_map = self.graph_map if self.graph_map is not None else {}
        for name, module in modules.items():
            if any(reserved in name for reserved in _NAMES.all()):
                raise ExportError(f"'{name}' holds a name the ETRecord reserves; pick another module name")
            programs = _edge_programs(module)
            if isinstance(programs, ExportedProgram):
                programs = {"forward": programs}
            graph_map.update({f"{name}/{method}": p for method, p in programs.items()})
        self.graph_map = graph_map

    def add_executorch_program(self, executorch_program) -> None:
        """Record the maps from instructions to Edge debug handles of an `ExecutorchProgramManager`."""
        if any(
            value is not None
            for value in (self._debug_handle_map, self._delegate_map, self._instruction_id_to_num_outs_map)
        ):
            raise ExportError("the ETRecord already holds an ExecuTorch program's maps; it records one")
        self._debug_handle_map, self._delegate_map, self._instruction_id_to_num_outs_map = _executorch_maps(
            executorch_program
        )

    def update_representative_inputs(self, representative_inputs: list) -> None:
        """Inputs to reproduce a run with (ExecuTorch: the first test case of ``forward``)."""
        self._representative_inputs = representative_inputs

    def update_reference_outputs(self, reference_outputs: dict | list) -> None:
        """Expected outputs, method -> list of outputs per test case; a list means ``forward``'s."""
        self._reference_outputs = (
            {"forward": reference_outputs} if isinstance(reference_outputs, list) else reference_outputs
        )

    def copy(self) -> ETRecord:
        """The programs without the ExecuTorch program's maps (what each `to_executorch` starts from)."""
        return ETRecord(self.exported_program, self.export_graph_id, self.edge_dialect_program, self.graph_map)

    # -- saving --------------------------------------------------------------------

    def save(self, path: str | os.PathLike | IO[bytes]) -> None:
        """Write the record as ExecuTorch's ETRecord zip (needs the Edge program and the maps)."""
        if not (self.edge_dialect_program and self._debug_handle_map):
            raise ExportError(
                "an ETRecord is saved with an Edge program and an ExecuTorch program's maps: "
                "call add_edge_dialect_program and add_executorch_program first"
            )
        path = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
        edge = self.edge_dialect_program
        edge_programs = {"forward": edge} if isinstance(edge, ExportedProgram) else edge
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(_NAMES.ETRECORD_IDENTIFIER, "")
            if self.exported_program is not None:
                _write_program(archive, _NAMES.EXPORTED_PROGRAM, self.exported_program)
            for method, program in edge_programs.items():
                _write_program(archive, f"{_NAMES.EDGE_DIALECT_EXPORTED_PROGRAM}/{method}", program)
            for name, program in (self.graph_map or {}).items():
                _write_program(archive, name if "/" in name else f"{name}/forward", program)
            for entry, attribute in _JSON_MAPS.items():
                if getattr(self, attribute) is not None:
                    archive.writestr(entry, json.dumps(getattr(self, attribute)))
            for entry, attribute in _TENSORS.items():
                if getattr(self, attribute) is not None:
                    buffer = io.BytesIO()
                    torch.save(getattr(self, attribute), buffer)
                    archive.writestr(entry, buffer.getvalue())


def _edge_programs(source) -> ExportedProgram | dict[str, ExportedProgram]:
    """One program, or method -> program for a manager with several (ExecuTorch's rule)."""
    if isinstance(source, ExportedProgram):
        return source
    methods = getattr(source, "methods", None)
    if methods is None or not callable(getattr(source, "exported_program", None)):
        raise ExportError(
            f"expected an ExportedProgram or an EdgeProgramManager to record, got {type(source).__name__}"
        )
    if len(methods) == 1:
        return source.exported_program(next(iter(methods)))
    return {method: source.exported_program(method) for method in sorted(methods)}


def _delegate_calls(graph_module: torch.fx.GraphModule) -> list:
    """(lowered module, number of outputs) of each delegate call, in graph (= emission) order."""
    calls = []
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "executorch_call_delegate":
            outputs = node.meta.get("val")
            calls.append(
                (getattr(graph_module, node.args[0].target), len(outputs) if isinstance(outputs, tuple) else 1)
            )
    return calls


def _executorch_maps(executorch_program) -> tuple[dict, dict, dict]:
    """ExecuTorch's three emitter maps, per method, from a torchedge `ExecutorchProgramManager`."""
    debug: dict[str, dict] = {}
    delegates: dict[str, dict] = {}
    outs: dict[str, dict] = {}
    for plan in executorch_program.program.execution_plan:
        handles = executorch_program.debug_handle_map.get(plan.name)
        if handles is None:  # a constant method: no instructions
            continue
        instructions = [i for chain in plan.chains for i in chain.instructions]
        calls = iter(_delegate_calls(executorch_program.graph_module(plan.name)))
        debug[plan.name], delegates[plan.name], outs[plan.name] = {}, {}, {}
        for index, (instruction, handle) in enumerate(zip(instructions, handles)):
            if isinstance(instruction.instr_args, DelegateCall):
                lowered, num_outputs = next(calls)
                graph = lowered.original_module.graph
                debug[plan.name][index] = [
                    n.meta["debug_handle"]
                    for n in graph.nodes
                    if n.op == "call_function" and n.meta.get("debug_handle") is not None
                ]
                outs[plan.name][index] = num_outputs
                backend_map = getattr(lowered, "meta", {}).get("debug_handle_map") or {}
                delegates[plan.name][index] = {"name": lowered.backend_id, "delegate_map": backend_map}
            elif handle is not None:
                debug[plan.name][index] = handle
    return debug, delegates, outs


def _write_program(archive: zipfile.ZipFile, base: str, program: ExportedProgram) -> None:
    serialized = serialize_program(program)
    archive.writestr(base, serialized.exported_program)
    for suffix, data in zip(_PIECES, serialized[1:]):
        archive.writestr(base + suffix, data)


def _read_program(archive: zipfile.ZipFile, base: str) -> ExportedProgram:
    pieces = [archive.read(base + suffix) for suffix in ("", *_PIECES)]
    return deserialize_program(SerializedProgram(*pieces), base)


def generate_etrecord(
    et_record: str | os.PathLike | IO[bytes],
    edge_dialect_program,
    executorch_program,
    exported_program: ExportedProgram | dict[str, ExportedProgram] | None = None,
    extra_recorded_export_modules: dict | None = None,
) -> None:
    """Build an ETRecord from the stages' outputs and save it to ``et_record`` (ExecuTorch's signature)."""
    etrecord = ETRecord()
    etrecord.add_exported_program(exported_program)
    etrecord.add_edge_dialect_program(edge_dialect_program)
    etrecord.add_executorch_program(executorch_program)
    if extra_recorded_export_modules is not None:
        etrecord.add_extra_export_modules(extra_recorded_export_modules)
    etrecord.save(et_record)


def parse_etrecord(etrecord_path: str | os.PathLike | IO[bytes]) -> ETRecord:
    """Read an ETRecord written by torchedge or by ExecuTorch."""
    try:
        archive = zipfile.ZipFile(etrecord_path, "r")
    except zipfile.BadZipFile as e:
        raise InvalidProgramError(f"{etrecord_path}: not an ETRecord (expected a zip archive)") from e
    with archive:
        names = archive.namelist()
        if _NAMES.ETRECORD_IDENTIFIER not in names:
            raise InvalidProgramError(f"{etrecord_path}: not an ETRecord (no '{_NAMES.ETRECORD_IDENTIFIER}' entry)")
        etrecord, edge, graph_map = ETRecord(export_graph_id=0), {}, {}
        edge_prefix = _NAMES.EDGE_DIALECT_EXPORTED_PROGRAM + "/"
        for name in names:
            if name in _JSON_MAPS:
                setattr(etrecord, _JSON_MAPS[name], json.loads(archive.read(name)))
            elif name in _TENSORS:
                setattr(etrecord, _TENSORS[name], torch.load(io.BytesIO(archive.read(name)), weights_only=True))
            elif name == _NAMES.ETRECORD_IDENTIFIER or name.endswith(_PIECES):
                continue
            elif name == _NAMES.EXPORTED_PROGRAM:
                etrecord.exported_program = _read_program(archive, name)
            elif name == _NAMES.EDGE_DIALECT_EXPORTED_PROGRAM:  # the single-method layout of older files
                edge["forward"] = _read_program(archive, name)
            elif name.startswith(edge_prefix):
                edge[name[len(edge_prefix) :]] = _read_program(archive, name)
            else:
                graph_map[name] = _read_program(archive, name)
    if edge:
        etrecord.edge_dialect_program = next(iter(edge.values())) if len(edge) == 1 else edge
    etrecord.graph_map = graph_map
    return etrecord
