"""The compiler's pipeline as data: the ordered stages `to_edge` and `to_executorch` run per method.

Each `Stage` is a name, one line saying what it does (the README's pipeline section is
generated from these, see `describe`), the function that runs it on a `MethodState`, and the
verifier of the IR it leaves, if any. `run_stages` is the one runner: it runs the stages in
order, verifies after each (unless the config turns verification off), names the method and
stage in any verification error, and logs every stage at debug level (``TORCHEDGE_DEBUG=1``
prints them to stderr).
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.export import ExportedProgram
from torch.export._remove_effect_tokens_pass import _remove_effect_tokens

from torchedge.errors import ExportError
from torchedge.exir.control_flow import inherit_source_lines, run_on_sub_graphs
from torchedge.exir.decompositions import cached_cia_ops, decompose_for_kernel_set, decomposition_table
from torchedge.exir.loadability import check_loadable, kernel_set_predicate
from torchedge.exir.memory_planning.planning_pass import assign_specs
from torchedge.exir.passes import OutVariantPass, RemoveAssertsPass, ShareViewsPass, ViewToCopyPass, run_passes
from torchedge.exir.passes.constant_folding import constant_input_names, fold_constants
from torchedge.exir.passes.conv_folding import fold_into_convolutions
from torchedge.exir.passes.debug_handles import DebugHandlePass
from torchedge.exir.passes.dense_outputs import DenseOutputsPass
from torchedge.exir.passes.functional_twins import FunctionalTwinsPass
from torchedge.exir.passes.kernel_fusion import fusion_passes
from torchedge.exir.passes.mutable_state import MutableStatePass, check_mutations
from torchedge.exir.passes.narrow_rows import NarrowRowsPass
from torchedge.exir.passes.scalar_to_tensor import ScalarToTensorPass
from torchedge.exir.symbolic import bound_data_dependent_sizes, upper_bound_shape
from torchedge.exir.verification import IRVerificationError, verify_aten, verify_edge

__all__ = [
    "Stage",
    "MethodState",
    "CAPTURE_STAGES",
    "EDGE_REWRITE_STAGES",
    "EDGE_STAGES",
    "EXECUTORCH_STAGES",
    "run_stages",
    "describe",
]

logger = logging.getLogger("torchedge.exir")
if os.environ.get("TORCHEDGE_DEBUG") == "1" and not logger.handlers:
    logger.addHandler(logging.StreamHandler())
    logger.setLevel(logging.DEBUG)


@dataclass
class MethodState:
    """What the stages of one method share: the program (`to_edge`) or the graph being lowered
    (`to_executorch`), and the config of the stage's caller."""

    method: str
    config: object
    program: ExportedProgram | None = None
    graph_module: torch.fx.GraphModule | None = None
    traced: ExportedProgram | None = None  # the program as exported, before decomposition
    extra: dict = field(default_factory=dict)

    @property
    def graph(self) -> torch.fx.GraphModule:
        if self.program is not None:
            return self.program.graph_module
        if self.graph_module is None:
            raise TypeError(f"method '{self.method}': the state holds neither a program nor a graph")
        return self.graph_module


@dataclass(frozen=True)
class Stage:
    name: str
    summary: str
    run: Callable[[MethodState], None]
    verifier: Callable[[torch.fx.GraphModule], None] | None = None


@contextmanager
def quiet_torch_internals():
    """Silence torch's notices about its own internals (``LeafSpec``'s deprecation, raised by the
    deep copies inside its decompositions): nothing a user of torchedge can act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*\bLeafSpec\b", category=FutureWarning)
        yield


def run_stages(stages, state: MethodState, verify: bool = True) -> MethodState:
    """Run ``stages`` in order on ``state``; verify after each one that declares a verifier."""
    for stage in stages:
        start, before = time.perf_counter(), len(state.graph.graph.nodes)
        with quiet_torch_internals():
            stage.run(state)
        logger.debug(
            "method %s: %s (%.1f ms, %d -> %d nodes)",
            state.method,
            stage.name,
            1e3 * (time.perf_counter() - start),
            before,
            len(state.graph.graph.nodes),
        )
        if verify and stage.verifier is not None:
            try:
                stage.verifier(state.graph)
            except IRVerificationError as e:
                raise IRVerificationError(f"method '{state.method}', after {stage.name}: {e}") from None
    return state


def describe(stages) -> str:
    """The stages as a Markdown list (the README's pipeline section)."""
    return "\n".join(f"{i}. `{s.name}`: {s.summary}" for i, s in enumerate(stages, 1))


def _graph_pass(make: Callable[[MethodState], Callable], sub_graphs: bool = True) -> Callable[[MethodState], None]:
    """A stage running one graph pass, made from the state, on the method's graph and (unless
    ``sub_graphs`` is False) on the sub-graphs of its control flow."""

    def run(state: MethodState) -> None:
        graph_pass = make(state)
        result = run_passes(state.graph, [graph_pass])
        if state.program is None:
            state.graph_module = result
        if sub_graphs:
            run_on_sub_graphs(result, graph_pass)

    return run


def _check_bounded_inputs(state: MethodState) -> None:
    for node in state.program.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder" and isinstance(val, torch.Tensor):
            upper_bound_shape(val.shape, f"input '{node.name}'")


def _decompose(state: MethodState) -> None:
    state.traced = state.program
    # Side effects (linalg's error checks) come wrapped in `with_effects` calls threading tokens:
    # in a program that runs its instructions in order, the plain call is the same.
    try:
        with cached_cia_ops():
            decomposed = state.program.run_decompositions(decomposition_table())
    except Exception as e:  # torch's own failure: say so, typed, instead of a bare traceback
        raise ExportError(
            f"method '{state.method}': torch.export's core-ATen decomposition failed "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        ) from e
    state.program = _remove_effect_tokens(decomposed)
    inherit_source_lines(state.program.graph_module)
    bound_data_dependent_sizes(state.program.graph_module)


def _check_mutations(state: MethodState) -> None:
    check_mutations(state.program, traced=state.traced)


def _when_folding(fn: Callable[[MethodState], None]) -> Callable[[MethodState], None]:
    def run(state: MethodState) -> None:
        if state.config.fold_constants:
            fn(state)

    return run


def _narrow_rows(state: MethodState) -> None:
    if state.config.narrow_rows:
        _graph_pass(lambda s: NarrowRowsPass())(state)


def _fold_into_convolutions(state: MethodState) -> None:
    fold_into_convolutions(state.program.graph_module, constant_input_names(state.program))


def _fold_constants(state: MethodState) -> None:
    state.program = fold_constants(state.program)


# `to_edge` runs these on every method first: afterwards each method's signature names the
# state it mutates, and the program can tell each method the state of the others.
CAPTURE_STAGES = (
    Stage(
        "check_bounded_inputs",
        "every dynamic input dimension has a maximum (memory is planned for it)",
        _check_bounded_inputs,
    ),
    Stage("decompose", "torch.export's core-ATen decomposition", _decompose, verify_aten),
    Stage(
        "check_mutations",
        "buffer mutations keep their dtype and shape, and no mutated buffer is returned",
        _check_mutations,
    ),
)
EDGE_REWRITE_STAGES = (
    Stage("RemoveAssertsPass", "drops runtime asserts", _graph_pass(lambda s: RemoveAssertsPass())),
    Stage("ViewToCopyPass", "view operators become their copy variants", _graph_pass(lambda s: ViewToCopyPass())),
    Stage(
        "DenseOutputsPass",
        "outputs whose recorded strides no dim order describes (the copy behind slice assignment) become contiguous",
        _graph_pass(lambda s: DenseOutputsPass()),
    ),
    Stage(
        "ScalarToTensorPass",
        "Python scalars and run-time sizes in Tensor positions become 0-d tensors",
        _graph_pass(lambda s: ScalarToTensorPass()),
    ),
    Stage(
        "NarrowRowsPass",
        "a select or slice moves before the operators whose rows it reads, so only those rows "
        "are computed (a classifier's last block for its one token; with `narrow_rows`)",
        _narrow_rows,
    ),
    Stage(
        "DebugHandlePass",
        "numbers every operator node for devtools",
        _graph_pass(lambda s: DebugHandlePass()),
        verify_edge,
    ),
    Stage(
        "fold_into_convolutions",
        "inference batch norms after a convolution and even zero padding before it "
        "fold into it (with `fold_constants`)",
        _when_folding(_fold_into_convolutions),
        verify_edge,
    ),
    Stage(
        "fold_constants",
        "what is computed only from weights and literals (weight transposes, rotary tables, "
        "causal masks) is evaluated once and stored, each distinct constant once; state is never folded "
        "(with `fold_constants`)",
        _when_folding(_fold_constants),
        verify_edge,
    ),
)
EDGE_STAGES = CAPTURE_STAGES + EDGE_REWRITE_STAGES


def _user_and_fusion_passes(state: MethodState) -> None:
    state.graph_module = run_passes(state.graph_module, [*state.config.passes, *fusion_passes(state.config)])
    decompose_for_kernel_set(state.graph_module, state.config.kernel_set)
    run_on_sub_graphs(state.graph_module, lambda gm: decompose_for_kernel_set(gm, state.config.kernel_set))


def _check_kernels(state: MethodState) -> None:
    if state.config.check_kernels:
        check_loadable(
            state.graph_module, state.method, kernel_set_predicate(state.config.kernel_set), state.config.backend_set
        )


def _plan_memory(state: MethodState) -> None:
    assign_specs(state.graph_module, state.extra["constant_names"], state.extra["state"])
    state.config.memory_planning_pass(state.graph_module)


EXECUTORCH_STAGES = (
    Stage(
        "user passes",
        "`ExecutorchBackendConfig(passes=...)`, then `FuseKernelsPass` with `fuse_kernels=True`",
        _user_and_fusion_passes,
    ),
    Stage(
        "ShareViewsPass",
        "reshapes of planned tensors become `memory.view` (no bytes, no instruction)",
        _graph_pass(lambda s: ShareViewsPass(s.extra["constant_names"]), sub_graphs=False),
    ),
    Stage(
        "FunctionalTwinsPass",
        "functionalized mutations (training batch norm, rrelu) call their mutating twin on copies",
        _graph_pass(lambda s: FunctionalTwinsPass()),
    ),
    Stage(
        "MutableStatePass",
        "buffer mutations become in-place writes or write-back copies",
        _graph_pass(
            lambda s: MutableStatePass(s.extra["signature"], reinplace=s.config.run_reinplace_pass), sub_graphs=False
        ),
    ),
    Stage(
        "OutVariantPass",
        "functional operators become out variants writing into `alloc`ated buffers",
        _graph_pass(lambda s: OutVariantPass()),
    ),
    Stage(
        "check_kernels",
        "every operator has a kernel and every delegate a backend in the target runtime",
        _check_kernels,
    ),
    Stage("MemoryPlanningPass", "tensor specs, lifetimes and offsets in the memory arenas", _plan_memory),
)
