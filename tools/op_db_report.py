"""Sweep PyTorch's op_db through torchedge and report how much of it matches eager.

    python tools/op_db_report.py --jobs 2 --json /tmp/op_db.json     # everything: ~5,800 cases
    python tools/op_db_report.py --jobs 2 --json /tmp/op_db.json --resume   # finish a cut-short one
    python tools/op_db_report.py --ops special.bessel --dtypes float32
    python tools/op_db_report.py --from-json /tmp/op_db.json --write-xfails   # no sweep

A case costs about 0.3 s of CPU (mostly torch's run_decompositions inside to_edge): the
full sweep (~5,400 cases) needs some 30 CPU-minutes, 15-20 min with --jobs 2 on an idle
2-core machine (43 min measured on a shared, loaded one).

Writes the Markdown report (default docs/op_coverage.md) and, with --json, every case's
outcome; results are also appended to ``<json>.jsonl`` as they arrive, so that an
interrupted sweep can be reported with --from-jsonl or finished with --resume (same
--json). --write-xfails regenerates tests/e2e/op_db_known_failures.json, the xfail list
of tests/e2e/test_op_db.py, for the cases swept (entries of cases not swept are kept).
The first sample of every (OpInfo, dtype) runs before the others.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository root: tools.qa
XFAILS = ROOT / "tests" / "e2e" / "op_db_known_failures.json"


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="*", help="only OpInfos whose name contains one of these")
    parser.add_argument("--dtypes", nargs="*", help="float32 int64 int32 bool (default: all)")
    parser.add_argument("--samples", type=int, default=3, help="first N samples per OpInfo and dtype")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    parser.add_argument("--markdown", type=Path, default=ROOT / "docs" / "op_coverage.md")
    parser.add_argument("--from-json", type=Path, help="report these results instead of sweeping")
    parser.add_argument("--from-jsonl", type=Path, help="report these streamed (partial) results")
    parser.add_argument("--resume", action="store_true", help="keep the cases already in <json>.jsonl")
    parser.add_argument("--write-xfails", action="store_true", help=f"regenerate {XFAILS.relative_to(ROOT)}")
    parser.add_argument("--note", default="", help="a line for the report's header (what was measured)")
    parser.add_argument("--quiet", action="store_true", help="do not print each failing case")
    return parser.parse_args(argv)


def _sweep(args):
    from tools.qa.op_db_pool import run_sweep
    from tools.qa.op_db_sweep import FAILURES, units

    todo = units(args.ops, args.dtypes)
    print(f"{len(todo)} (OpInfo, dtype) units, {args.samples} samples each, {args.jobs} jobs", flush=True)
    path = args.json.with_suffix(args.json.suffix + "l") if args.json else None
    earlier = _read_jsonl(path) if args.resume and path and path.exists() else []
    stream = open(path, "a" if earlier else "w") if path else None
    done = [0]

    def report(result):
        done[0] += 1
        if stream:
            stream.write(json.dumps(result.to_dict()) + "\n")
            stream.flush()
        if not args.quiet and result.outcome in FAILURES:
            print(f"[{done[0]}] {result.op} {result.dtype} #{result.sample}: {result.outcome} {result.message[:150]}")

    try:
        skip = frozenset((r.op, r.dtype, r.sample) for r in earlier)
        new = run_sweep(todo, args.samples, args.jobs, args.timeout, report=report, done=skip)
        return earlier + new
    finally:
        if stream:
            stream.close()


def _read_jsonl(path: Path) -> list:
    from tools.qa.op_db_sweep import CaseResult

    return [CaseResult(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def _merged_xfails(results, fresh: dict) -> dict:
    """``fresh`` plus the entries of the current file for the cases this sweep did not run."""
    swept: dict[str, set[int]] = {}
    for r in results:
        swept.setdefault(f"{r.op}/{r.dtype}", set()).add(r.sample)
    merged = {}
    for key, entry in (json.loads(XFAILS.read_text()) if XFAILS.exists() else {}).items():
        kept = [s for s in entry["samples"] if s not in swept.get(key, set())]
        if kept:
            merged[key] = {"reason": entry["reason"], "samples": kept}
    for key, entry in fresh.items():
        old = merged.get(key, {"samples": []})["samples"]
        merged[key] = {"reason": entry["reason"], "samples": sorted(set(old) | set(entry["samples"]))}
    return merged


def main(argv=None) -> int:
    args = _parse(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from tools.qa.op_db_report import known_failures, markdown_report
    from tools.qa.op_db_sweep import DTYPES, CaseResult

    began = time.time()
    if args.from_json:
        results = [CaseResult(**c) for c in json.loads(args.from_json.read_text())["cases"]]
    elif args.from_jsonl:
        results = _read_jsonl(args.from_jsonl)
    else:
        results = _sweep(args)
    # Sweeps before sample generation failures were reported once repeated them per sample range.
    results = [r for r in results if not (r.sample and r.message.startswith("sample generation"))]
    results.sort(key=lambda r: (r.op, list(DTYPES).index(r.dtype), r.sample))
    elapsed = time.time() - began
    import torch

    settings = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "samples": args.samples,
        "dtypes": args.dtypes or "all",
        "ops": args.ops or "all",
        "jobs": args.jobs,
        "sweep_seconds": round(elapsed) if not (args.from_json or args.from_jsonl) else None,
        "case_seconds": round(sum(r.seconds for r in results)),
    }
    header = (
        "Generated by `python tools/op_db_report.py`: "
        + "; ".join(f"{k} {v}" for k, v in settings.items() if v is not None)
        + ". Rerun it to refresh this page."
        + (f"\n\n{args.note}" if args.note else "")
    )
    text = markdown_report(results, header)
    print(text.split("\n## Per operator")[0])
    args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps({"settings": settings, "cases": [r.to_dict() for r in results]}, indent=1))
    if args.write_xfails:
        XFAILS.write_text(json.dumps(_merged_xfails(results, known_failures(results)), indent=1, sort_keys=True) + "\n")
        print(f"wrote {XFAILS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
