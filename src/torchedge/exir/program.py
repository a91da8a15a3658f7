"""The public pipeline: `to_edge` -> `EdgeProgramManager` -> `ExecutorchProgramManager`.

What runs on each method, in order, is declared in `torchedge.exir.pipeline` (`EDGE_STAGES`,
`EXECUTORCH_STAGES`); this module adds what spans methods: delegation, shared state, emission
and serialisation. State spans methods: a buffer that one method mutates is state in every
method that reads it (`share_state`, between the capture and the rewriting stages of
`to_edge`, before constant folding could take it for a weight).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

import torch
from torch.export import ExportedProgram

from torchedge.errors import ExportError, InternalError
from torchedge.exir.backend.lowered_module import LoweredBackendModule
from torchedge.exir.backend.to_backend import to_backend
from torchedge.exir.config import EdgeCompileConfig, ExecutorchBackendConfig
from torchedge.exir.emit import ConstantTable, MethodEmitter, emit_constant_method
from torchedge.exir.emit.constants import ExternalConstants
from torchedge.exir.emit.delegates import DelegateTable
from torchedge.exir.emit.input_ranges import input_minimums_data
from torchedge.exir.passes import run_passes
from torchedge.exir.passes.mutable_state import check_unshared_readers, mutable_buffers, program_state, share_state
from torchedge.exir.pipeline import (
    CAPTURE_STAGES,
    EDGE_REWRITE_STAGES,
    EXECUTORCH_STAGES,
    MethodState,
    Stage,
    run_stages,
)
from torchedge.exir.verification import verify_edge
from torchedge.schema.program import Program
from torchedge.serialize.ptd import TensorLayout, write_ptd
from torchedge.serialize.pte_writer import serialize_pte_parts

if TYPE_CHECKING:  # imported when an ETRecord is asked for: its serializer loads torch._dynamo (slow)
    from torchedge.devtools.etrecord import ETRecord

__all__ = [
    "to_edge",
    "to_edge_transform_and_lower",
    "EdgeProgramManager",
    "ExecutorchProgramManager",
    "MethodPlanSummary",
    "EXTERNAL_CONSTANTS_FILE",
]

# The file ExecuTorch names for the constants it keeps outside the program.
EXTERNAL_CONSTANTS_FILE = "_default_external_constant.ptd"


def _as_method_dict(programs) -> dict[str, ExportedProgram]:
    if isinstance(programs, ExportedProgram):
        return {"forward": programs}
    if isinstance(programs, dict) and all(isinstance(p, ExportedProgram) for p in programs.values()):
        return dict(programs)
    raise ExportError(
        f"to_edge expects an ExportedProgram or a dict of method name -> ExportedProgram, got {type(programs).__name__}"
    )


def to_edge(
    programs,
    constant_methods: dict | None = None,
    compile_config: EdgeCompileConfig | None = None,
    generate_etrecord: bool = False,
) -> EdgeProgramManager:
    """Lower exported programs to the Edge dialect (core ATen, no view ops).

    ``generate_etrecord=True`` records a copy of the exported and Edge programs; the
    `ExecutorchProgramManager` that ``to_executorch`` returns completes it (`get_etrecord`).
    """
    config = compile_config or EdgeCompileConfig()
    exported = _as_method_dict(programs)
    recorded = copy.deepcopy(exported) if generate_etrecord else None
    methods = _edge_methods(exported, config)
    edge = EdgeProgramManager(methods, constant_methods or {}, config)
    if recorded is not None:
        from torchedge.devtools.etrecord import ETRecord

        edge._etrecord = ETRecord()
        edge._etrecord.add_exported_program(recorded)
        edge._etrecord.add_edge_dialect_program(copy.deepcopy(edge))
    return edge


def _edge_methods(exported: dict[str, ExportedProgram], config: EdgeCompileConfig) -> dict[str, ExportedProgram]:
    """Every method through the Edge stages. Between the capture stages, after which each
    method's signature names the state it writes, and the rewriting ones, which fold
    constants, what any method mutates becomes state in every method that reads it."""
    verify = config._check_ir_validity
    captured = {
        name: _program_of(run_stages(CAPTURE_STAGES, MethodState(name, config, program=ep), verify))
        for name, ep in exported.items()
    }
    state = program_state(captured.values())
    return {
        name: _program_of(
            run_stages(EDGE_REWRITE_STAGES, MethodState(name, config, program=share_state(ep, state)), verify)
        )
        for name, ep in captured.items()
    }


def _program_of(method: MethodState) -> ExportedProgram:
    if method.program is None:
        raise InternalError(f"method '{method.method}': the Edge stages left no program")
    return method.program


def to_edge_transform_and_lower(
    programs,
    transform_passes=None,
    partitioner=None,
    constant_methods: dict | None = None,
    compile_config: EdgeCompileConfig | None = None,
    generate_etrecord: bool = False,
) -> EdgeProgramManager:
    """`to_edge`, then the user's passes, then delegation to each partitioner in order.

    With ``generate_etrecord`` the ETRecord holds the Edge program before lowering, and the
    one after the passes as ``edge_after_transform`` (ExecuTorch's name)."""
    edge = to_edge(programs, constant_methods, compile_config, generate_etrecord)
    if transform_passes:
        edge = edge.transform(transform_passes)
        if edge._etrecord is not None:
            edge._etrecord.add_extra_export_modules({"edge_after_transform": copy.deepcopy(edge)})
    if partitioner:
        edge = edge.to_backend(partitioner)
    return edge


class EdgeProgramManager:
    def __init__(
        self,
        methods: dict[str, ExportedProgram],
        constant_methods: dict,
        compile_config: EdgeCompileConfig,
        etrecord: ETRecord | None = None,
    ):
        self._methods = methods
        self._constant_methods = constant_methods
        self.compile_config = compile_config
        self._etrecord = etrecord

    def get_etrecord(self) -> ETRecord:
        """The ETRecord begun by ``generate_etrecord=True`` (programs only; the maps come with
        `to_executorch`)."""
        return _recorded(self._etrecord)

    @property
    def methods(self) -> set[str]:
        return set(self._methods)

    def exported_program(self, method_name: str = "forward") -> ExportedProgram:
        return self._methods[method_name]

    def transform(self, passes) -> EdgeProgramManager:
        """Run user passes, in order, on a copy of every method; returns a new manager.

        Passes edit the graph module in place (returning it or a `PassResult`).
        Unless ``_check_ir_validity`` is off, the Edge verifier runs after each
        pass, so a pass that breaks the IR is named in the error.
        """
        stages = [
            Stage(f"pass {getattr(p, '__name__', type(p).__name__)}", "a user pass", _user_pass(p), verify_edge)
            for p in passes
        ]
        methods = {
            name: run_stages(
                stages,
                MethodState(name, self.compile_config, program=copy.deepcopy(ep)),
                self.compile_config._check_ir_validity,
            ).program
            for name, ep in self._methods.items()
        }
        return EdgeProgramManager(methods, self._constant_methods, self.compile_config, self._etrecord)

    def to_backend(self, partitioner) -> EdgeProgramManager:
        """Delegate what ``partitioner`` tags in every method; returns a new manager."""
        partitioners = partitioner if isinstance(partitioner, (list, tuple)) else [partitioner]
        methods = {}
        for name, ep in self._methods.items():
            for p in partitioners:
                ep = to_backend(ep, p)
            methods[name] = ep
        return EdgeProgramManager(methods, self._constant_methods, self.compile_config, self._etrecord)

    def to_executorch(self, config: ExecutorchBackendConfig | None = None) -> ExecutorchProgramManager:
        """Out variants, memory planning and emission; serialises to `.pte` bytes."""
        config = config or ExecutorchBackendConfig()
        planner = config.memory_planning_pass
        if not planner.share_mutable_buffers:
            check_unshared_readers(self._methods)
        graphs, summaries = {}, {}
        for name in sorted(self._methods):
            sig = self._methods[name].graph_signature
            state = mutable_buffers(sig)
            constant_names = (
                set(sig.inputs_to_parameters) | set(sig.inputs_to_buffers) | set(sig.inputs_to_lifted_tensor_constants)
            ) - set(state)
            method = MethodState(
                name,
                config,
                graph_module=_copy_graph(self._methods[name].graph_module),
                extra={"signature": sig, "state": state, "constant_names": constant_names},
            )
            gm = run_stages(EXECUTORCH_STAGES, method).graph_module
            graphs[name] = gm
            summaries[name] = MethodPlanSummary(gm.meta["non_const_buffer_sizes"][1:], planner.lower_bound)
        if planner.share_mutable_buffers:
            planner.place_shared_state(list(graphs.values()))
        constants, mutable_data, delegate_data = ConstantTable(), ConstantTable(), DelegateTable()
        external = ExternalConstants() if config.external_constants else None
        plans, debug_handles = [], {}
        for name, gm in graphs.items():
            emitter = MethodEmitter(
                name,
                gm,
                self._methods[name],
                constants,
                gm.meta["non_const_buffer_sizes"],
                config.emit_stacktrace,
                delegate_data,
                mutable_data,
                config.emit_mutable_buffer_names,
                external,
            )
            plans.append(emitter.emit())
            debug_handles[name] = emitter.debug_handles
        plans.extend(emit_constant_method(n, v) for n, v in self._constant_methods.items())
        plans.sort(key=lambda p: p.name)
        program = Program(
            version=0,
            execution_plan=plans,
            constant_buffer=constants.buffers(),
            backend_delegate_data=delegate_data.inline_data(),
            segments=[],
        )
        parts = serialize_pte_parts(
            program,
            segment_alignment=config.segment_alignment,
            constant_tensor_alignment=config.constant_tensor_alignment,
            extract_delegate_segments=config.extract_delegate_segments,
            mutable_data=[b.storage for b in mutable_data.buffers()],
            named_data={**delegate_data.named_data, **input_minimums_data(self._methods)},
        )
        data_files = {} if external is None else {EXTERNAL_CONSTANTS_FILE: _ptd_of(external)}
        manager = ExecutorchProgramManager(
            parts, program, graphs, summaries, debug_handles, data_files, check_constants=constants.check_unchanged
        )
        if self._etrecord is not None:
            manager._etrecord = self._etrecord.copy()
            manager._etrecord.add_executorch_program(manager)
        return manager


def _copy_graph(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A deep copy of ``gm`` for the stages to rewrite, sharing (not copying) its delegates'
    partition programs and their weights, which the stages only read."""
    memo: dict[int, object] = {
        id(m.original_module): m.original_module for m in gm.modules() if isinstance(m, LoweredBackendModule)
    }
    return copy.deepcopy(gm, memo)


def _recorded(etrecord: ETRecord | None) -> ETRecord:
    if etrecord is None:
        raise ExportError(
            "no ETRecord was generated: pass generate_etrecord=True to to_edge or to_edge_transform_and_lower"
        )
    return etrecord


def _ptd_of(external: ExternalConstants) -> bytes:
    layouts = {name: TensorLayout(*layout) for name, layout in external.layouts.items()}
    return write_ptd(external.data, layouts)


def _user_pass(p):
    def run(state: MethodState) -> None:
        run_passes(state.program.graph_module, [p])

    return run


@dataclass(frozen=True)
class MethodPlanSummary:
    """Planned arena sizes of one method and the lower bound for them."""

    planned_buffer_sizes: list[int]
    lower_bound: int


class ExecutorchProgramManager:
    """The compiled program. Its `.pte` is held as the parts it concatenates (the constants are
    views of the program's tensors): `save` writes them one after another; `buffer` joins them
    (once, on first use)."""

    def __init__(
        self,
        parts: list,
        program: Program,
        graph_modules: dict[str, torch.fx.GraphModule],
        memory_plans: dict[str, MethodPlanSummary],
        debug_handles: dict[str, list],
        data_files: dict[str, bytes] | None = None,
        check_constants: Callable[[], None] | None = None,
    ):
        self._parts = parts
        self._buffer: bytes | None = None
        self._check_constants = check_constants or (lambda: None)  # raises where a viewed constant changed
        self.data_files = data_files or {}  # file name -> .ptd bytes (external constants)
        self.debug_handle_map = debug_handles  # method -> debug handle of each instruction
        self._program = program
        self._graph_modules = graph_modules
        self.memory_plans = memory_plans
        self._etrecord: ETRecord | None = None

    def get_etrecord(self) -> ETRecord:
        """The ETRecord of a program compiled with ``generate_etrecord=True``: ``.save(path)`` it
        for ExecuTorch's Inspector or torchedge's."""
        return _recorded(self._etrecord)

    @property
    def buffer(self) -> bytes:
        if self._buffer is None:
            self._check_constants()
            self._buffer = b"".join(self._parts)
            self._parts = [self._buffer]
        return self._buffer

    @property
    def program(self) -> Program:
        return self._program

    @property
    def methods(self) -> set[str]:
        return {plan.name for plan in self._program.execution_plan}

    def graph_module(self, method_name: str = "forward") -> torch.fx.GraphModule:
        """The final (out-variant, planned) graph of a method."""
        return self._graph_modules[method_name]

    def write_to_file(self, f: BinaryIO) -> None:
        if self._buffer is None:
            self._check_constants()
        for part in self._parts:
            f.write(part)

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "wb") as f:
            self.write_to_file(f)

    def write_tensor_data_to_file(self, outdir: str | os.PathLike) -> list[str]:
        """Write the `.ptd` files of the data kept outside the program (ExecuTorch's name for
        it) into ``outdir``; returns their paths."""
        paths = []
        for name, data in self.data_files.items():
            path = os.path.join(outdir, name)
            with open(path, "wb") as f:
                f.write(data)
            paths.append(path)
        return paths
