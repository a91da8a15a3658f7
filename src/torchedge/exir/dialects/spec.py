"""The Edge dtype-constraint spec, `edge.yaml`: its data, loader and writer.

One entry per operator, in ExecuTorch's edge.yaml DSL::

    - func: aten::sigmoid
      namespace: edge
      inherits: aten::sigmoid
      type_alias:
        T0: [Bool, Byte, Char, Int, Long, Short]
        T1: [Double, Float]
        T2: [Float]
      type_constraint:
      - self: T0
        __ret_0: T2
      - self: T1
        __ret_0: T1

``type_alias`` names lists of dtypes; each ``type_constraint`` item is one admissible
assignment of aliases to the operator's tensor arguments and returns (``__ret_<i>`` for an
unnamed return). Names bound to the same alias in one item take the same dtype. An operator
the spec does not list admits every dtype for each of its tensors, as in ExecuTorch.

>>> edge_spec()["aten::sigmoid"].allowed_types("__ret_0") >= {torch.float32, torch.float64}
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from torchedge.errors import ExportError
from torchedge.exir.dtypes import torch_dtype
from torchedge.exir.ir import op_name
from torchedge.schema.scalar_type import NAMES, ScalarType

__all__ = [
    "DTYPE_NAMES",
    "SPEC_PATH",
    "OpSpec",
    "parse_spec",
    "load_spec",
    "edge_spec",
    "format_spec",
    "is_tensor_like",
    "tensor_io_names",
    "op_spec",
]

SPEC_PATH = Path(__file__).with_name("edge.yaml")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml reads the spec much faster

# The dtypes the DSL names (ExecuTorch's regular, non-quantized tensor dtypes).
DTYPE_NAMES = {
    NAMES[code]: torch_dtype(code)
    for code in (
        ScalarType.BOOL,
        ScalarType.BYTE,
        ScalarType.CHAR,
        ScalarType.SHORT,
        ScalarType.INT,
        ScalarType.LONG,
        ScalarType.HALF,
        ScalarType.BFLOAT16,
        ScalarType.FLOAT,
        ScalarType.DOUBLE,
        ScalarType.UINT16,
        ScalarType.UINT32,
        ScalarType.UINT64,
        ScalarType.COMPLEX64,
        ScalarType.COMPLEX128,
    )
}
_NAME_OF = {dtype: name for name, dtype in DTYPE_NAMES.items()}


@dataclass(frozen=True)
class OpSpec:
    """The dtype constraints of one operator (``func`` as in a `.pte`: ``"aten::add.Tensor"``)."""

    func: str
    type_alias: dict[str, tuple[torch.dtype, ...]]
    type_constraint: tuple[dict[str, str], ...]

    def allowed_types(self, name: str) -> set[torch.dtype]:
        """Every dtype some constraint admits for the tensor ``name``."""
        return {d for c in self.type_constraint if name in c for d in self.type_alias[c[name]]}


def _dtype(name: str, where: str) -> torch.dtype:
    try:
        return DTYPE_NAMES[name]
    except KeyError:
        raise ExportError(f"{where}: unknown dtype '{name}', expected one of {sorted(DTYPE_NAMES)}") from None


def _entry(item: dict, where: str) -> OpSpec:
    func = item.get("func")
    if not func or item.get("inherits", func) != func:
        raise ExportError(f"{where}: an entry needs 'func' equal to 'inherits', got {func!r}, {item.get('inherits')!r}")
    aliases = {
        alias: tuple(_dtype(n, f"{where} {func}") for n in names)
        for alias, names in (item.get("type_alias") or {}).items()
    }
    constraints = tuple(dict(c) for c in item.get("type_constraint") or ())
    for constraint in constraints:
        undefined = set(constraint.values()) - set(aliases)
        if undefined:
            raise ExportError(f"{where} {func}: type_constraint uses undefined aliases {sorted(undefined)}")
    return OpSpec(func, aliases, constraints)


def parse_spec(text: str, where: str = "edge.yaml") -> dict[str, OpSpec]:
    """Entries of an edge.yaml text, by ``func``."""
    specs = {}
    for item in yaml.load(text, Loader=_LOADER) or ():
        spec = _entry(item, where)
        specs[spec.func] = spec
    return specs


def load_spec(path: str | Path = SPEC_PATH) -> dict[str, OpSpec]:
    return parse_spec(Path(path).read_text(encoding="utf-8"), where=str(path))


@functools.cache
def edge_spec() -> dict[str, OpSpec]:
    """The spec torchedge ships (`edge.yaml` beside this module), loaded once."""
    return load_spec()


def format_spec(specs, header: str = "") -> str:
    """edge.yaml text for ``specs`` (an iterable of `OpSpec`), in their order; `parse_spec` reads it back."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for spec in specs:
        lines += [
            f"- func: {spec.func}",
            "  namespace: edge",
            f"  inherits: {spec.func}",
            "  type_alias:" + ("" if spec.type_alias else " {}"),
        ]
        lines += [f"    {alias}: [{', '.join(map(_NAME_OF.get, dtypes))}]" for alias, dtypes in spec.type_alias.items()]
        lines.append("  type_constraint:" + ("" if spec.type_constraint else " []"))
        for constraint in spec.type_constraint:
            items = [f"{name}: {alias}" for name, alias in constraint.items()] or ["{}"]
            lines += [f"  - {items[0]}"] + [f"    {item}" for item in items[1:]]
        lines.append("")
    return "\n".join(lines)


def is_tensor_like(type_) -> bool:
    """Tensor, Tensor?, Tensor[] and Tensor?[]."""
    for wrapper in (torch.OptionalType, torch.ListType, torch.OptionalType):
        if isinstance(type_, wrapper):
            type_ = type_.getElementType()
    return isinstance(type_, torch.TensorType)


def tensor_io_names(schema) -> tuple[list[str], list[str]]:
    """The names the spec gives an operator's tensor arguments and tensor returns.

    A return is named as in the schema (``values``, ``indices``) or ``__ret_<i>``, counting
    tensor returns only.
    """
    args = [a.name for a in schema.arguments if is_tensor_like(a.type)]
    tensor_returns = [r for r in schema.returns if is_tensor_like(r.type)]
    return args, [r.name or f"__ret_{i}" for i, r in enumerate(tensor_returns)]


@functools.cache
def op_spec(op: torch._ops.OpOverload) -> OpSpec:
    """The spec of an ATen (or other) operator; every regular dtype for each tensor if unlisted."""
    name = op_name(op)
    if name in edge_spec():
        return edge_spec()[name]
    args, rets = tensor_io_names(op._schema)
    every = tuple(DTYPE_NAMES.values())
    names = args + rets
    return OpSpec(name, {f"T{i}": every for i in range(len(names))}, ({n: f"T{i}" for i, n in enumerate(names)},))
