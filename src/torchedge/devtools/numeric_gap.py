"""A run's intermediate outputs against eager's, operator by operator: the numeric debugger.

The reference is the method's Edge program (what `to_executorch` lowered) run in eager on
the same inputs. Each instruction carries the debug handle of the Edge node it computes, so
its logged output pairs with that node's eager output.

Two questions, two comparisons:

* `numeric_gaps`: how far each instruction's output is from eager's, end to end (ExecuTorch's
  ``calculate_numeric_gap``: the distances accumulate through the network);
* `first_divergence`: the first instruction whose kernel is wrong. Its eager twin runs on
  the *runtime's own* inputs, so error carried in from earlier operators does not count, and
  the output must agree within the kernel tests' tolerances (`output_compare.TOLERANCES`).

Each operator is named where the user wrote it: the innermost frame of its stack trace in the
user's code (`user_source`, not a line of ``torch/nn/modules``) and the module it ran in
(`module_path`, from ``nn_module_stack``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.export.graph_signature import InputKind

from torchedge.devtools.output_compare import compare_outputs
from torchedge.errors import InputError
from torchedge.exir import dtypes
from torchedge.exir.ir import constant_value
from torchedge.exir.source import frames, user_frame
from torchedge.user_files import is_user_file

__all__ = [
    "Reference",
    "GapRow",
    "Divergence",
    "DISTANCES",
    "numeric_gaps",
    "first_divergence",
    "reference_of",
    "user_source",
    "module_path",
]


def _as_float(a, b) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)


def _mse(a, b) -> float:
    x, y = _as_float(a, b)
    return float(np.mean(np.square(x - y))) if x.size else 0.0


def _l1(a, b) -> float:
    x, y = _as_float(a, b)
    return float(np.abs(x - y).sum())


def _snr(a, b) -> float:
    """10 log10(signal power / error power) in dB, with ``a`` the signal (eager); inf when equal."""
    x, y = _as_float(a, b)
    noise = float(np.mean(np.square(x - y))) if x.size else 0.0
    signal = float(np.mean(np.square(x))) if x.size else 0.0
    if noise == 0.0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf


# ExecuTorch's definitions: mean squared error, summed absolute error, signal-to-noise ratio.
DISTANCES: dict[str, Callable] = {"MSE": _mse, "L1": _l1, "SNR": _snr}


@dataclass
class Reference:
    """What a run is compared with: a method's Edge program, the debug handle of each of the
    method's instructions (`ExecutorchProgramManager.debug_handle_map`) and the inputs."""

    program: torch.export.ExportedProgram
    instruction_handles: list
    inputs: tuple


@dataclass
class GapRow:
    instruction_id: int
    aot_ops: list[str]
    runtime_ops: list[str]
    aot_intermediate_output: object
    runtime_intermediate_output: object
    gap: float
    source: str | None
    module: str | None = None


@dataclass
class Divergence:
    """The first instruction whose output disagrees with eager on the same inputs."""

    instruction_id: int
    operator: str
    node: str
    source: str | None
    problem: str
    module: str | None = None

    def __str__(self) -> str:
        module = f" in module {self.module}" if self.module else ""
        where = f" at {self.source}" if self.source else ""
        return (
            f"instruction {self.instruction_id} ({self.operator}, node '{self.node}'){module}{where} "
            f"diverges from eager: {self.problem}"
        )


def user_source(node: torch.fx.Node) -> str | None:
    """``File "model.py", line 12, in forward``: the innermost frame of the node's stack trace in
    the user's code (outside torch, torchedge and the standard library), else the innermost
    frame of a real file (an operator of torchedge's own models)."""
    for file, line, function, _ in reversed(frames(node)):
        if is_user_file(file):
            return f'File "{file}", line {line}, in {function}'
    return user_frame(node)


def module_path(node: torch.fx.Node) -> str | None:
    """``block.attn.act (ReLU)``: the innermost module the node ran in, as the model names it, and
    its class; None for an operator of the model's own ``forward``."""
    stack = [(path, kind) for path, kind in (node.meta.get("nn_module_stack") or {}).values() if path]
    if not stack:
        return None
    path, kind = stack[-1]
    name = kind.__qualname__ if isinstance(kind, type) else str(kind).rpartition(".")[2]
    return f"{path} ({name})"


def _lifted_arguments(program: torch.export.ExportedProgram, inputs: tuple) -> list:
    user = iter(inputs)
    args = []
    for spec in program.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            args.append(next(user))
        else:
            args.append(constant_value(program, spec.target))
    return args


class _Recorder(torch.fx.Interpreter):
    """Runs the graph in eager and keeps every node's output."""

    def __init__(self, module):
        super().__init__(module)
        self.outputs: dict[str, object] = {}

    def run_node(self, n):
        result = super().run_node(n)
        self.outputs[n.name] = result
        return result


def _eager_outputs(reference: Reference) -> dict[str, object]:
    program = reference.program
    recorder = _Recorder(program.graph_module)
    inputs = [torch.as_tensor(np.asarray(x)) if isinstance(x, np.ndarray) else x for x in reference.inputs]
    with torch.no_grad():
        recorder.run(*_lifted_arguments(program, tuple(inputs)))
    return recorder.outputs


def _nodes_by_handle(program) -> dict[int, torch.fx.Node]:
    return {
        n.meta["debug_handle"]: n
        for n in program.graph.nodes
        if n.op == "call_function" and n.meta.get("debug_handle") is not None
    }


def _numpy(value):
    if isinstance(value, torch.Tensor):
        return dtypes.to_numpy(value.detach())
    if isinstance(value, (list, tuple)):
        return [_numpy(v) for v in value]
    return value


def _paired(reference: Reference, runtime_outputs: dict[int, object]):
    """(instruction id, Edge node, runtime value) for every Edge node a logged instruction computes,
    in program order. Passes that split a node (a write-back copy, a scalar made a tensor) give
    its instructions its debug handle: the last of them writes the node's value."""
    nodes = _nodes_by_handle(reference.program)
    handles = reference.instruction_handles
    last: dict[int, int] = {}
    for pc in sorted(runtime_outputs):
        handle = handles[pc] if 0 <= pc < len(handles) else None
        if handle in nodes and runtime_outputs[pc] is not None:
            last[handle] = pc
    for handle, pc in sorted(last.items(), key=lambda item: item[1]):
        yield pc, nodes[handle], runtime_outputs[pc]


def _flat(value) -> np.ndarray | None:
    """All the numbers of a tensor or tensor list, as one float64 vector (None for other values)."""
    if isinstance(value, np.ndarray):
        return value.astype(np.float64).reshape(-1)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
        return np.concatenate([v.astype(np.float64).reshape(-1) for v in value])
    return None


def numeric_gaps(reference: Reference, runtime_outputs: dict[int, object], distance: str = "MSE") -> list[GapRow]:
    """One row per logged instruction: its output against its Edge node's eager output."""
    metric = DISTANCES.get(distance.strip().upper())
    if metric is None:
        raise InputError(f"unknown distance {distance!r}: use one of {', '.join(DISTANCES)}")
    eager = _eager_outputs(reference)
    rows = []
    for pc, node, got in _paired(reference, runtime_outputs):
        want = _numpy(eager[node.name])
        a, b = _flat(want), _flat(got)
        if a is None or b is None or a.shape != b.shape:
            continue
        rows.append(GapRow(pc, [node.name], [node.name], want, got, metric(a, b), user_source(node), module_path(node)))
    return rows


def first_divergence(reference: Reference, runtime_outputs: dict[int, object]) -> Divergence | None:
    """The first instruction whose output differs from its operator run in eager on the runtime's own
    inputs (values no instruction logged come from eager), beyond the kernel tests' tolerances."""
    eager = _eager_outputs(reference)
    runtime_by_node: dict[str, object] = {}
    for pc, node, got in _paired(reference, runtime_outputs):
        runtime_by_node[node.name] = got
        if not isinstance(node.target, torch._ops.OpOverload):
            continue

        def value_of(arg, own=node.name):
            if isinstance(arg, torch.fx.Node):
                if arg.name in runtime_by_node and arg.name != own:
                    return _torch(runtime_by_node[arg.name])
                return eager[arg.name]
            return arg

        args = torch.fx.node.map_aggregate(node.args, value_of)
        kwargs = torch.fx.node.map_aggregate(node.kwargs, value_of)
        with torch.no_grad():
            want = node.target(*args, **kwargs)
        wants = list(want) if isinstance(want, (tuple, list)) else [want]
        outs = list(got) if isinstance(got, (tuple, list)) else [got]
        problem, _ = compare_outputs(node.target, args, kwargs, outs, wants)
        if problem:
            return Divergence(pc, str(node.target), node.name, user_source(node), problem, module_path(node))
    return None


def _torch(value):
    if isinstance(value, np.ndarray):
        return dtypes.to_torch(value)
    if isinstance(value, list):
        return [_torch(v) for v in value]
    return value


def reference_of(etrecord, method_name: str, need_inputs: bool = True) -> Reference:
    """The Edge program, instruction debug handles and representative inputs an ETRecord holds."""
    programs = etrecord.edge_dialect_program
    program = programs.get(method_name) if isinstance(programs, dict) else programs
    by_instruction = (etrecord._debug_handle_map or {}).get(method_name)
    if program is None or by_instruction is None:
        raise InputError(f"the ETRecord has no Edge program and debug handles for method '{method_name}'")
    # ExecuTorch's layout: instruction id (an int, or its string once saved) -> the node's handle,
    # or the handles of a delegate's partition (a delegate call is no one node: left out).
    handles: list = [None] * (1 + max((int(k) for k in by_instruction), default=-1))
    for key, handle in by_instruction.items():
        handles[int(key)] = handle if isinstance(handle, int) else None
    inputs = etrecord._representative_inputs if need_inputs else ()
    if need_inputs and not inputs:
        raise InputError(
            "the ETRecord holds no representative inputs: call etrecord.update_representative_inputs(...) "
            "before saving it, or give the inputs of the run"
        )
    if need_inputs and method_name != "forward":
        raise InputError(f"an ETRecord's representative inputs are forward's: give the inputs of '{method_name}'")
    return Reference(program, handles, tuple(inputs or ()))
