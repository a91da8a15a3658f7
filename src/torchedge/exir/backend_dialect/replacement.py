"""The pass that lowers Edge programs to the backend dialect: every match of a bound pattern
(`bind_pattern_to_op`) becomes one call of its backend operator.

Matching is torch.fx's `SubgraphMatcher` over the Edge graph: the pattern's parameters match any
value (a node or a literal), its operators and literals must be those of the graph, and no node
inside a match may be read outside it except the pattern's results.
"""

from __future__ import annotations

import torch
from torch.fx.passes.utils.matcher_utils import InternalMatch, SubgraphMatcher

from torchedge.exir.backend_dialect.ops import BoundPattern, bound_patterns
from torchedge.exir.backend_dialect.verifier import verify_backend
from torchedge.exir.control_flow import nested_graph_modules
from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.passes.fusion_matching import replace_with_fused, replace_with_fused_results
from torchedge.exir.verification import IRVerificationError

__all__ = ["BackendOpReplacement", "to_backend_dialect"]


class BackendOpReplacement(PassBase):
    """Replace the matches of the patterns bound to operators of ``libraries`` (`torch.library`
    objects or namespace names; all bound patterns when none is given), largest pattern first."""

    def __init__(self, *libraries):
        super().__init__()
        namespaces = {getattr(lib, "ns", lib) for lib in libraries}
        self.namespaces = frozenset(namespaces) if namespaces else None

    def patterns(self) -> list[BoundPattern]:
        return bound_patterns(self.namespaces)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        """Replace in ``graph_module`` and in the sub-graphs of its control flow."""
        modified = False
        for module in [graph_module, *(sub for _, sub in nested_graph_modules(graph_module))]:
            if self._replace_in(module.graph):
                module.graph.lint()
                module.recompile()
                modified = True
        return PassResult(graph_module, modified)

    def _replace_in(self, graph: torch.fx.Graph) -> bool:
        modified = False
        for pattern in self.patterns():
            renamed: dict = {}  # a replaced result -> the node that took its place
            for found in SubgraphMatcher(pattern.graph).match(graph):
                call = _replace(graph, pattern, found, renamed)
                if call is not None:
                    takers = [call] if len(found.returning_nodes) == 1 else sorted(call.users, key=lambda u: u.args[1])
                    renamed.update(zip(found.returning_nodes, takers))
                    modified = True
        return modified


def _replace(graph: torch.fx.Graph, pattern: BoundPattern, found: InternalMatch, renamed: dict):
    """Replace one match by a call of the pattern's operator (None where its guard declines)."""
    placeholders = [n for n in pattern.graph.nodes if n.op == "placeholder"]
    matched_values = (found.nodes_map[p] for p in placeholders)
    values = {
        name: renamed.get(v, v) if isinstance(v, torch.fx.Node) else v
        for name, v in zip(pattern.parameters, matched_values)
    }
    if pattern.guard is not None and not pattern.guard(values):
        return None
    positional = [a for a in pattern.op._schema.arguments if not a.kwarg_only]
    last = max((i for i, a in enumerate(positional) if a.name in values), default=-1)
    args = tuple(values[a.name] if a.name in values else a.default_value for a in positional[: last + 1])
    matched = [g for p, g in found.nodes_map.items() if p.op == "call_function"]
    results = found.returning_nodes
    if len(results) == 1:
        return replace_with_fused(graph, results[0], pattern.op, args, matched)
    return replace_with_fused_results(graph, results, pattern.op, args, matched)


def to_backend_dialect(edge, *libraries, passes=None):
    """The `EdgeProgramManager` ``edge`` lowered to the backend dialect: `BackendOpReplacement`
    over ``libraries`` (every bound pattern when none is given), or ``passes`` instead, on every
    method; then the backend dialect's verifier (unless ``_check_ir_validity`` is off)."""
    if passes is not None and libraries:
        raise TypeError("to_backend_dialect: name the libraries or give the passes, not both")
    lowered = edge.transform(passes if passes is not None else [BackendOpReplacement(*libraries)])
    if lowered.compile_config._check_ir_validity:
        for name in sorted(lowered.methods):
            try:
                verify_backend(lowered.exported_program(name).graph_module)
            except IRVerificationError as e:
                raise IRVerificationError(f"method '{name}', in the backend dialect: {e}") from None
    return lowered
