"""`torchedge kernels --oplist`: the operators programs need, as ExecuTorch's selected-operators YAML.

ExecuTorch's selective build (``gen_oplist``, then its kernel codegen) reads a
``selected_operators.yaml``: an ``operators`` mapping (each operator with ``is_root_operator``,
``is_used_for_training``, ``include_all_overloads`` and the ``debug_info`` of the programs that
need it) and ``et_kernel_metadata``: per operator, the kernel keys of its calls (the dtype and
dim order of each tensor argument, `torchedge.runtime.method_meta.operator_kernel_keys`), so a
build links only those kernels, specialised to those dtypes. The operators of delegated
partitions are not listed: they run inside their backend, which the build links whole.

The same file restricts a torchedge runtime (``Runtime.get(kernels="ops.yaml")``) and checks a
program against the target at compile time (``ExecutorchBackendConfig(kernel_set=
read_selected_operators("ops.yaml"))``). Written by hand, in the block style PyYAML's
``safe_dump`` gives, so that no YAML library is needed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable

from torchedge.runtime.data_loader import loader_for
from torchedge.runtime.method_meta import operator_kernel_keys
from torchedge.serialize import deserialize_pte

__all__ = ["program_operators", "selected_operators_yaml", "cmd_oplist"]

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./:;,|+-]*")


def program_operators(source) -> dict[str, set[str]]:
    """Operator name -> kernel keys, over every method of a `.pte` (a path, bytes or a file)."""
    loader = loader_for(source, mmap_file=True)
    found: dict[str, set[str]] = {}
    for plan in deserialize_pte(loader.data).program.execution_plan or []:
        for name, keys in operator_kernel_keys(plan).items():
            found.setdefault(name, set()).update(keys)
    return found


def _scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain where YAML reads it back as the same string, else quoted."""
    if _PLAIN.fullmatch(text) and text.lower() not in ("true", "false", "null", "yes", "no", "on", "off"):
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def selected_operators_yaml(programs: Iterable[tuple[str, dict[str, set[str]]]]) -> str:
    """The selected-operators YAML of ``(debug name, program_operators(...))`` pairs."""
    debug: dict[str, set[str]] = {}
    keys: dict[str, set[str]] = {}
    for name, operators in programs:
        for op, op_keys in operators.items():
            debug.setdefault(op, set()).add(name)
            keys.setdefault(op, set()).update(op_keys)
    lines = ["build_features: []", "custom_classes: []"]
    called = {op: sorted(k) for op, k in sorted(keys.items()) if k}
    lines.append("et_kernel_metadata:" + ("" if called else " {}"))
    for op, sorted_keys in called.items():
        lines.append(f"  {_scalar(op)}:")
        lines += [f"  - {_scalar(key)}" for key in sorted_keys]
    lines += ["include_all_non_op_selectives: false", "include_all_operators: false", "kernel_metadata: {}"]
    lines.append("operators:" + ("" if debug else " {}"))
    for op in sorted(debug):
        lines += [f"  {_scalar(op)}:", "    debug_info:"]
        lines += [f"    - {_scalar(name)}" for name in sorted(debug[op])]
        lines += ["    include_all_overloads: false", "    is_root_operator: true", "    is_used_for_training: true"]
    return "\n".join(lines) + "\n"


def cmd_oplist(paths: list[str], output: str | None) -> int:
    from torchedge.cli.loading import check_program_path

    for path in paths:
        check_program_path(path)
    programs = [(os.fspath(path), program_operators(path)) for path in paths]
    text = selected_operators_yaml(programs)
    if output is None:
        print(text, end="")
    else:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
        count = len({op for _, operators in programs for op in operators})
        print(f"wrote {count} operator(s) of {len(programs)} program(s) to {output}")
    return 0
