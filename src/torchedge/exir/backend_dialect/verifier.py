"""The backend dialect's verifier: the Edge dialect's rules (`verify_edge`), plus those of the
operators the backend dialect adds.

Beyond the Edge dialect it admits backend operators: operators bound to a pattern with
`bind_pattern_to_op`, and the quantized operators (``quantized_decomposed``, and torchedge's
variants of them). The namespace of a bound library holds backend operators only: any other
operator of it is rejected, and so is a backend operator with no out variant, since it could not
be emitted. Each error names the node, the operator and the user's source line.
"""

from __future__ import annotations

import torch

from torchedge.errors import ExportError
from torchedge.exir.backend_dialect.ops import QUANTIZED_NAMESPACES, backend_namespaces, bound_patterns
from torchedge.exir.control_flow import nested_graph_modules
from torchedge.exir.ir import op_name
from torchedge.exir.op_schema import is_out_variant, out_variant
from torchedge.exir.source import describe_node
from torchedge.exir.verification import IRVerificationError, verify_edge

__all__ = ["verify_backend"]


def verify_backend(graph_module: torch.fx.GraphModule, check_dtypes: bool = True) -> None:
    """Raise `IRVerificationError` naming the first node the backend dialect does not admit."""
    verify_edge(graph_module, check_dtypes)
    namespaces = backend_namespaces()
    bound = {p.op for p in bound_patterns()}
    graphs = [graph_module, *(sub for _, sub in nested_graph_modules(graph_module))]
    for node in (n for g in graphs for n in g.graph.nodes):
        op = node.target
        if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload) or op.namespace not in namespaces:
            continue
        problem = _problem(op, bound)
        if problem:
            raise IRVerificationError(f"{problem}: operator '{op_name(op)}' {describe_node(node)}")


def _problem(op: torch._ops.OpOverload, bound: set) -> str | None:
    if is_out_variant(op):
        return None
    if op.namespace not in QUANTIZED_NAMESPACES and op not in bound:
        return (
            f"not a backend operator: library '{op.namespace}' holds backend operators, and no pattern "
            "is bound to this one (bind_pattern_to_op)"
        )
    try:
        out_variant(op)
    except ExportError:
        return "a backend operator without an out variant, so it cannot be emitted"
    return None
