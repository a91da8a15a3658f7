"""The vocabulary every compiler stage shares: delegate calls, argument binding, constants,
operator names.

Stages import these from here instead of from each other, so a pass need not import the
backend package to recognise a delegate call, nor the emitter a pass to bind arguments.
"""

from __future__ import annotations

import torch

__all__ = [
    "executorch_call_delegate",
    "is_delegate_call",
    "bind_arguments",
    "constant_value",
    "op_name",
    "pte_operator_name",
    "QUANTIZED_NAMESPACE",
]

# torchedge's own namespace for the out variants of ``quantized_decomposed`` operators
# (`torchedge.exir.dialects.quantized`); a `.pte` names them as ExecuTorch does.
QUANTIZED_NAMESPACE = "torchedge_quantized"


def executorch_call_delegate(lowered, *args, out=None):
    """Graph-level delegate call: eager semantics are the partition's own program.

    ``lowered`` is a `LoweredBackendModule`. The out-variant pass adds ``out=`` buffers
    (one per output); the emitter turns the call into a DelegateCall instruction over
    inputs then outputs.
    """
    outputs = lowered.original_module.module()(*args)
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def is_delegate_call(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is executorch_call_delegate


def bind_arguments(op: torch._ops.OpOverload, args, kwargs) -> dict:
    """Map a call's positional and keyword arguments to the schema's argument names."""
    bound = dict(kwargs)
    for schema_arg, value in zip(op._schema.arguments, args):
        bound[schema_arg.name] = value
    return bound


def constant_value(ep, target: str) -> torch.Tensor:
    """The tensor of a parameter, buffer or lifted constant of ``ep`` (`ExportedProgram`), by its name."""
    return ep.state_dict[target] if target in ep.state_dict else ep.constants[target]


def pte_operator_name(schema) -> tuple[str, str]:
    """(name, overload) of an operator in a ``.pte``: torchedge's namespace becomes ExecuTorch's."""
    namespace, _, name = schema.name.partition("::")
    return f"{'quantized_decomposed' if namespace == QUANTIZED_NAMESPACE else namespace}::{name}", schema.overload_name


def op_name(op: torch._ops.OpOverload) -> str:
    """``"aten::add.out"``: the name the `.pte` operator table uses."""
    name, overload = pte_operator_name(op._schema)
    return f"{name}.{overload}" if overload else name
