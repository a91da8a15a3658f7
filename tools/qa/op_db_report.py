"""Summaries of an op_db sweep: the Markdown report, the JSON of every case, the known failures.

Pass rates count only the cases torchedge is responsible for: those where eager cannot
run or ``torch.export`` fails are excluded (and listed). A failure's *cause* groups
similar errors: "no kernel for aten::foo" when the Edge verifier rejects an operator,
"aten::foo: no type constraint admits <dtypes>" when it rejects its dtypes, else the
outcome, the operator the error names and the error's first line, numbers masked.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from tools.qa.op_db_sweep import DTYPES, EXCLUDED, FAILURES, OUTCOMES, CaseResult

__all__ = ["cause_of", "known_failures", "markdown_report", "rate"]

_DTYPES_REJECTED = re.compile(r"(aten::[\w.]+): dtypes (.*?) match no type constraint")
_NUMBER = re.compile(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b")


def cause_of(result: CaseResult) -> str:
    message = result.message
    if result.outcome == "compile_error" and "not an Edge operator" in message:
        return f"no kernel for {result.operator or '?'} (not an Edge operator)"
    dtypes = _DTYPES_REJECTED.search(message)
    if result.outcome == "compile_error" and dtypes:
        return f"{dtypes.group(1)}: no type constraint admits {dtypes.group(2)}"
    if result.outcome in ("wrong_result", "wrong_dtype_shape"):
        return f"{result.outcome} in {result.op}"
    if result.outcome == "timeout":
        return f"timeout in {result.op}"
    message = message.split(" (node ")[0].split(", from File")[0]
    message = _NUMBER.sub("N", message)[:140]
    where = f" {result.operator}" if result.operator else ""
    return f"{result.outcome}{where}: {message}"


def rate(results: list[CaseResult]) -> tuple[int, int, str]:
    """(passed, tested, percentage) over the cases that count against torchedge."""
    tested = [r for r in results if r.outcome not in EXCLUDED]
    passed = sum(r.outcome == "pass" for r in tested)
    return passed, len(tested), f"{100 * passed / len(tested):.1f}%" if tested else "-"


def _breakdown(title: str, groups: dict[str, list[CaseResult]]) -> list[str]:
    lines = [
        f"## {title}",
        "",
        f"| {title.split()[-1]} | pass rate | pass/tested | " + " | ".join(FAILURES) + " | excluded |",
    ]
    lines.append("|---" * (len(FAILURES) + 4) + "|")
    for key, results in groups.items():
        passed, tested, pct = rate(results)
        counts = Counter(r.outcome for r in results)
        excluded = sum(counts[o] for o in EXCLUDED)
        lines.append(
            f"| {key} | {pct} | {passed}/{tested} | "
            + " | ".join(str(counts[o]) for o in FAILURES)
            + f" | {excluded} |"
        )
    return lines + [""]


def _per_operator(results: list[CaseResult]) -> list[str]:
    by_op: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_op[r.op].append(r)
    lines = [
        "## Per operator",
        "",
        "| OpInfo | family | dtypes | pass/tested | excluded | first failure |",
        "|---|---|---|---|---|---|",
    ]
    for op, cases in by_op.items():
        passed, tested, _ = rate(cases)
        dtypes = ", ".join(dict.fromkeys(r.dtype for r in cases))
        failing = [r for r in cases if r.outcome in FAILURES]
        excluded = [r for r in cases if r.outcome in EXCLUDED]
        first = f"{failing[0].dtype}: {cause_of(failing[0])}" if failing else ""
        shown = f"{len(excluded)} ({excluded[0].outcome})" if excluded else "0"
        lines.append(f"| {op} | {cases[0].family} | {dtypes} | {passed}/{tested} | {shown} | {_cell(first)} |")
    return lines + [""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:160]


def markdown_report(results: list[CaseResult], header: str = "", top: int = 40) -> str:
    """The Markdown report of a sweep's results."""
    counts = Counter(r.outcome for r in results)
    passed, tested, pct = rate(results)
    lines = ["# torchedge against eager over PyTorch's op_db", ""]
    if header:
        lines += [header, ""]
    lines += [
        f"**Pass rate: {pct}** ({passed} of {tested} cases torchedge is responsible for; "
        f"{len(results)} cases in all, {sum(counts[o] for o in EXCLUDED)} excluded because eager "
        "cannot run them or torch.export fails).",
        "",
        "| outcome | cases |",
        "|---|---|",
        *(f"| {o} | {counts[o]} |" for o in OUTCOMES),
        "",
    ]
    by_dtype = {d: [r for r in results if r.dtype == d] for d in DTYPES if any(r.dtype == d for r in results)}
    lines += _breakdown("Per dtype", by_dtype)
    families: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        families[r.family].append(r)
    lines += _breakdown("Per family", dict(sorted(families.items())))
    causes = Counter(cause_of(r) for r in results if r.outcome in FAILURES)
    lines += [f"## Most common failure causes (top {top} of {len(causes)})", "", "| cases | cause |", "|---|---|"]
    lines += [f"| {n} | {_cell(cause)} |" for cause, n in causes.most_common(top)]
    lines += ["", "## Excluded: torch.export fails (PyTorch's limit)", "", "| cases | reason |", "|---|---|"]
    exports = Counter(cause_of(r) for r in results if r.outcome == "export_error")
    lines += [f"| {n} | {_cell(cause)} |" for cause, n in exports.most_common()]
    export_ops = sorted({r.op for r in results if r.outcome == "export_error"})
    lines += ["", f"OpInfos with export failures ({len(export_ops)}): " + ", ".join(export_ops), ""]
    return "\n".join(lines + _per_operator(results))


def known_failures(results: list[CaseResult]) -> dict[str, dict]:
    """``"op/dtype" -> {"reason", "samples"}`` for every (OpInfo, dtype) with failing samples."""
    failures: dict[str, dict] = {}
    for r in results:
        if r.outcome in FAILURES:
            entry = failures.setdefault(f"{r.op}/{r.dtype}", {"reason": cause_of(r), "samples": []})
            entry["samples"].append(r.sample)
    return dict(sorted(failures.items()))
