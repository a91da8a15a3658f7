"""Exported programs as ExecuTorch's ETRecord stores them, written and read with torch's serializer.

ExecuTorch serialises each program of an ETRecord with its own copy of torch.export's JSON
schema (``executorch.exir.serde``, schema version 5.x) plus a ``debug_handle`` string in each
node's metadata. torch's serializer writes the same structures at a later schema version (8.x);
the differences, read from both schema files, are few and are bridged here both ways:

* writing: fields ExecuTorch's schema lacks are dropped (its reader rejects unknown fields),
  dtype numbers that moved are renumbered, the version is ExecuTorch's, and each node's
  ``debug_handle`` is added;
* reading: ExecuTorch's Edge operators (``executorch.exir.dialects.edge.ops.aten.add.Tensor``)
  become the ATen overloads they wrap (``torch.ops.aten.add.Tensor``), so the graphs load and
  run without ExecuTorch; verifiers are torch's own; ``debug_handle`` goes back to node meta.

The other three pieces (state dict, constants, example inputs) are ``torch.save`` payloads in
both, passed through unchanged.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import NamedTuple

from torch._export.serde import schema as torch_schema
from torch._export.serde import serialize as torch_serde
from torch._export.serde.union import _Union
from torch.export import ExportedProgram

from torchedge.errors import ExportError, InvalidProgramError

__all__ = ["SerializedProgram", "serialize_program", "deserialize_program", "ETRECORD_SCHEMA_VERSION"]

# The schema version ExecuTorch 1.5.1 writes and requires (major must match).
ETRECORD_SCHEMA_VERSION = (5, 4)

# torch-schema fields that ExecuTorch's schema does not define, per dataclass.
_FIELDS_EXECUTORCH_LACKS = {
    "ExportedProgram": {"guards_code", "torch_version"},
    "Graph": {"sym_float_values"},
    "GraphModule": {"metadata", "treespec_namedtuple_fields"},
    "ModuleCallSignature": {"forward_arg_names"},
    "NamedArgument": {"kind"},
    "Node": {"is_hop_single_tensor_return"},
}
# Argument / output kinds torch writes that ExecuTorch's schema cannot read.
_KINDS_EXECUTORCH_LACKS = {
    "as_complex",
    "as_float_lists",
    "as_int_lists",
    "as_nested_tensors",
    "as_optional_tensor",
    "as_string_to_argument",
    "as_sym_float",
    "as_sym_floats",
    "parameter_mutation",
}
# ScalarType numbers that differ: torch's value -> ExecuTorch's (uint16 and two float8 types).
_SCALAR_TYPE_TO_EXECUTORCH = {28: 14, 30: 15, 29: 16}
_SCALAR_TYPE_FROM_EXECUTORCH = {v: k for k, v in _SCALAR_TYPE_TO_EXECUTORCH.items()}
_EDGE_OPS = ("executorch.exir.dialects.edge.ops.", "executorch.exir.dialects.edge._ops.")


class SerializedProgram(NamedTuple):
    """The four pieces an ETRecord stores per program (ExecuTorch's ``SerializedArtifact``)."""

    exported_program: bytes
    state_dict: bytes
    constants: bytes
    example_inputs: bytes


def _to_executorch_dict(obj, where: str):
    """A torch-schema object as the JSON dict ExecuTorch's schema reads."""
    if isinstance(obj, _Union):
        if obj.type in _KINDS_EXECUTORCH_LACKS:
            raise ExportError(
                f"{where}: ExecuTorch's ETRecord schema has no '{obj.type}' (torch writes it for this graph); "
                "the program cannot be recorded in a form ExecuTorch reads"
            )
        return {obj.type: _to_executorch_dict(obj.value, where)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if isinstance(obj, torch_schema.Node):
            where = f"node '{obj.name}'"
        dropped = _FIELDS_EXECUTORCH_LACKS.get(type(obj).__name__, set())
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in dropped}
        return {name: _to_executorch_dict(value, where) for name, value in fields.items()}
    if isinstance(obj, torch_schema.ScalarType):
        return _SCALAR_TYPE_TO_EXECUTORCH.get(obj.value, obj.value)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [_to_executorch_dict(item, where) for item in obj]
    if isinstance(obj, dict):
        return {key: _to_executorch_dict(value, where) for key, value in obj.items()}
    return torch_serde._dataclass_to_dict(obj)  # floats: inf and nan as torch spells them


def serialize_program(program: ExportedProgram) -> SerializedProgram:
    """``program`` as ExecuTorch's ETRecord stores it (its ``serialize``'s format)."""
    for node in program.graph.nodes:
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "executorch_call_delegate":
            raise ExportError(
                f"node '{node.name}' calls a delegate: an ETRecord records the Edge program before "
                "to_backend (pass generate_etrecord=True to to_edge / to_edge_transform_and_lower)"
            )
    try:
        artifact = torch_serde.ExportedProgramSerializer().serialize(program)
    except Exception as e:  # torch's serializer raises assorted types
        raise ExportError(f"torch's serializer cannot write this program for an ETRecord: {e}") from e
    document = _to_executorch_dict(artifact.exported_program, "the program")
    document["schema_version"] = {"major": ETRECORD_SCHEMA_VERSION[0], "minor": ETRECORD_SCHEMA_VERSION[1]}
    document["dialect"] = ""
    handles = {n.name: n.meta["debug_handle"] for n in program.graph.nodes if n.meta.get("debug_handle") is not None}
    for node in document["graph_module"]["graph"]["nodes"]:
        if node["name"] in handles:
            node["metadata"]["debug_handle"] = str(handles[node["name"]])
    return SerializedProgram(
        json.dumps(document, allow_nan=False).encode("utf-8"),
        artifact.state_dict,
        artifact.constants,
        artifact.example_inputs,
    )


def _from_executorch_dict(document: dict) -> dict:
    """ExecuTorch's JSON made readable by torch: Edge operators named as ATen, dtypes renumbered."""
    graph = document["graph_module"]["graph"]
    for node in graph["nodes"]:
        for prefix in _EDGE_OPS:
            if node["target"].startswith(prefix):
                node["target"] = "torch.ops." + node["target"][len(prefix) :]
    for meta in graph.get("tensor_values", {}).values():
        meta["dtype"] = _SCALAR_TYPE_FROM_EXECUTORCH.get(meta["dtype"], meta["dtype"])
    document["verifiers"] = []  # ExecuTorch's EDGE verifier lives in executorch; torch's own checks apply
    return document


def deserialize_program(serialized: SerializedProgram, where: str = "program") -> ExportedProgram:
    """An ETRecord program (torchedge's or ExecuTorch's) as a torch `ExportedProgram` with ATen targets;
    each call node's ``meta["debug_handle"]`` is restored."""
    try:
        document = _from_executorch_dict(json.loads(serialized.exported_program.decode("utf-8")))
        program = torch_serde._dict_to_dataclass(torch_schema.ExportedProgram, document)
        result = torch_serde.ExportedProgramDeserializer().deserialize(
            program,
            serialized.state_dict,
            serialized.constants,
            serialized.example_inputs or None,
            _unsafe_skip_version_check=True,
        )
    except Exception as e:  # a corrupt entry can fail anywhere in torch's deserializer
        raise InvalidProgramError(f"ETRecord entry '{where}' is not a readable exported program: {e}") from e
    handles = {
        node["name"]: int(node["metadata"]["debug_handle"])
        for node in document["graph_module"]["graph"]["nodes"]
        if node.get("metadata", {}).get("debug_handle")
    }
    for node in result.graph.nodes:
        if node.name in handles:
            node.meta["debug_handle"] = handles[node.name]
    return result
