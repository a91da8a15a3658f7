"""Core-ATen coverage of the portable kernel library.

Which core ATen operators have a portable kernel, and, checked on PyTorch's OpInfo
samples, for which dtypes that kernel matches eager (`torchedge kernels --coverage --dtypes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from torchedge.devtools.core_operators import core_operators
from torchedge.devtools.kernel_check import DTYPES, Status, check_calls, worst
from torchedge.devtools.opinfo_sampling import opinfo_calls
from torchedge.exir.dtypes import scalar_type
from torchedge.kernels.registry import registered_operators
from torchedge.schema.scalar_type import SHORT_NAMES

__all__ = ["OperatorCoverage", "coverage", "format_coverage", "SHORT_DTYPE_NAMES"]

SHORT_DTYPE_NAMES = {dtype: SHORT_NAMES[scalar_type(dtype)] for dtype in DTYPES}  # OpInfo's: f32, bf16


@dataclass
class OperatorCoverage:
    """One core operator: its kernel's name, whether it is registered, and per-dtype outcomes."""

    name: str
    kernel: str
    covered: bool
    passing: list[torch.dtype] = field(default_factory=list)
    failing: list[torch.dtype] = field(default_factory=list)


def coverage(check_dtypes: bool = False) -> list[OperatorCoverage]:
    """Every core ATen operator; with ``check_dtypes``, each kernel checked against eager per dtype."""
    registered = set(registered_operators())
    rows = {c.name: OperatorCoverage(c.name, c.kernel, c.kernel in registered) for c in core_operators()}
    if check_dtypes:
        for (name, dtype), calls in opinfo_calls().items():
            if name not in rows:  # an operator outside the core set
                continue
            status = worst(check_calls(calls)).status
            if status is Status.PASS:
                rows[name].passing.append(dtype)
            elif status in (Status.MISMATCH, Status.RAISED):
                rows[name].failing.append(dtype)
    return list(rows.values())


def _dtypes(dtypes: list[torch.dtype]) -> str:
    return ",".join(SHORT_DTYPE_NAMES[d] for d in DTYPES if d in dtypes) or "-"


def format_coverage(rows: list[OperatorCoverage], check_dtypes: bool = False) -> str:
    """A table (``op  status  kernel``, plus ``dtypes-ok  dtypes-failing``) and the totals."""
    header = ["op", "status", "kernel"] + (["dtypes-ok", "dtypes-failing"] if check_dtypes else [])
    table = [header] + [
        [r.name, "covered" if r.covered else "missing", r.kernel]
        + ([_dtypes(r.passing), _dtypes(r.failing)] if check_dtypes else [])
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    covered = sum(r.covered for r in rows)
    lines.append(
        f"\n{covered}/{len(rows)} core ATen operators have a portable kernel "
        f"({100 * covered / len(rows):.1f}%); {len(rows) - covered} missing"
    )
    if check_dtypes:
        ok, bad = sum(len(r.passing) for r in rows), sum(len(r.failing) for r in rows)
        legend = ", ".join(f"{short}={str(dtype).removeprefix('torch.')}" for dtype, short in SHORT_DTYPE_NAMES.items())
        lines.append(f"(operator, dtype) pairs checked on OpInfo samples: {ok} match eager, {bad} fail ({legend})")
        unsampled = sum(1 for r in rows if r.covered and not (r.passing or r.failing))
        lines.append(
            f"{unsampled} covered operators are never reached by OpInfo samples in eager "
            "(backward ops, composite overloads such as upsample_*.vec and *.Scalar)"
        )
    return "\n".join(lines)
