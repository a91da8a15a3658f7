"""Core-ATen coverage of the portable kernel library.

Which core ATen operators have a portable kernel, and, checked on PyTorch's OpInfo
samples, for which dtypes that kernel matches eager (`torchedge kernels --coverage --dtypes`).
The per-dtype check runs the project's kernel-check harness, ``tools/qa`` of a source checkout
(it samples PyTorch's internal OpInfo database): it is not part of the installed package.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from torchedge.errors import TorchEdgeError
from torchedge.exir.core_operators import core_operators
from torchedge.exir.dialects.spec import DTYPE_NAMES
from torchedge.exir.dtypes import scalar_type
from torchedge.kernels.registry import registered_operators
from torchedge.schema.scalar_type import SHORT_NAMES

__all__ = ["OperatorCoverage", "coverage", "format_coverage", "SHORT_DTYPE_NAMES"]

# OpInfo's short names (f32, bf16) of the Edge dialect's dtypes, in the spec's order.
SHORT_DTYPE_NAMES = {
    dtype: SHORT_NAMES[scalar_type(dtype)] for dtype in DTYPE_NAMES.values() if scalar_type(dtype) in SHORT_NAMES
}


@dataclass
class OperatorCoverage:
    """One core operator: its kernel's name, whether it is registered, and per-dtype outcomes."""

    name: str
    kernel: str
    covered: bool
    passing: list[torch.dtype] = field(default_factory=list)
    failing: list[torch.dtype] = field(default_factory=list)


def _qa_harness():
    """``tools.qa``'s `kernel_check` and `opinfo_sampling` modules, from the source checkout this
    package is installed from (editable); a clear error where there is none (a wheel)."""
    root = Path(__file__).resolve().parents[3]
    if (root / "tools" / "qa" / "__init__.py").is_file() and str(root) not in sys.path:
        sys.path.append(str(root))
    try:
        from tools.qa import kernel_check, opinfo_sampling
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("tools"):
            raise
        raise TorchEdgeError(
            "checking kernels per dtype (--dtypes) runs the kernel checks in tools/qa of a torchedge source "
            "checkout, which the installed package does not include: install torchedge from a checkout "
            "(pip install -e .); --coverage alone needs no checkout"
        ) from None
    return kernel_check, opinfo_sampling


def coverage(check_dtypes: bool = False) -> list[OperatorCoverage]:
    """Every core ATen operator; with ``check_dtypes``, each kernel checked against eager per
    dtype (`_qa_harness`: needs a source checkout)."""
    registered = set(registered_operators())
    rows = {c.name: OperatorCoverage(c.name, c.kernel, c.kernel in registered) for c in core_operators()}
    if check_dtypes:
        check, sampling = _qa_harness()
        for (name, dtype), calls in sampling.opinfo_calls().items():
            if name not in rows:  # an operator outside the core set
                continue
            status = check.worst(check.check_calls(calls)).status
            if status is check.Status.PASS:
                rows[name].passing.append(dtype)
            elif status in (check.Status.MISMATCH, check.Status.RAISED):
                rows[name].failing.append(dtype)
    return list(rows.values())


def _dtypes(dtypes: list[torch.dtype]) -> str:
    return ",".join(short for d, short in SHORT_DTYPE_NAMES.items() if d in dtypes) or "-"


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
        checked = {dtype for r in rows for dtype in r.passing + r.failing}
        legend = ", ".join(
            f"{short}={str(dtype).removeprefix('torch.')}"
            for dtype, short in SHORT_DTYPE_NAMES.items()
            if dtype in checked
        )
        lines.append(f"(operator, dtype) pairs checked on OpInfo samples: {ok} match eager, {bad} fail ({legend})")
        unsampled = sum(1 for r in rows if r.covered and not (r.passing or r.failing))
        lines.append(
            f"{unsampled} covered operators are never reached by OpInfo samples in eager "
            "(backward ops, composite overloads such as upsample_*.vec and *.Scalar)"
        )
    return "\n".join(lines)
