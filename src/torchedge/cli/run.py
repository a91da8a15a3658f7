"""`torchedge run` and `torchedge bench`: execute and time a .pte on the NumPy runtime.

`torchedge run` given a bundled program (a ``.bpte``, recognised by its ``BP08`` identifier)
verifies it instead: every test case of every method, one line each, exit status 1 if any fails.
``--repeat 0`` runs once and times nothing (`bench`: reports the memory only); ``run --output``
saves the outputs as an .npz (`save_outputs`).
"""

from __future__ import annotations

import contextlib
import json

from torchedge.cli.eager import eager_side, torch_threads
from torchedge.cli.inputs import load_inputs
from torchedge.cli.loading import check_program_path, load_program
from torchedge.cli.output import describe, latency, save_outputs, summary, threads_text
from torchedge.devtools.timing import PeakRss, Timing, current_rss, time_calls

__all__ = ["cmd_run", "cmd_bench"]


def _method(args):
    program = load_program(args.pte, args.data_path)
    return program.load_method(args.method, num_threads=args.threads, fuse=args.fuse)


def cmd_run(args) -> int:
    check_program_path(args.pte)
    if _is_bundled_program(args.pte):
        return _verify_bundled_program(args)
    method = _method(args)
    inputs = load_inputs(args, method.meta)
    outputs = method.execute(inputs)
    for i, out in enumerate(outputs):
        print(f"output {i}: {summary(out)}")
    if args.output:
        print(f"wrote {save_outputs(args.output, outputs)}")
    if args.repeat:
        timing = time_calls({"torchedge": lambda: method.execute(inputs)}, args.repeat, warmup=0)["torchedge"]
        print(f"latency: {latency(timing)} ({args.repeat} runs, {threads_text(method.num_threads)})")
    return 0


def _is_bundled_program(path) -> bool:
    from torchedge.serialize.bundled_program import is_bundled_program

    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False  # the .pte loader says what is wrong with the path
    return is_bundled_program(head)


def _verify_bundled_program(args) -> int:
    """Run every test case of a bundled program; one line per case, status 1 if any fails."""
    from torchedge.errors import InputError
    from torchedge.runtime import Runtime
    from torchedge.runtime.bundled_program import load_bundled_program

    for given, option in ((args.inputs, "--inputs"), (args.data_path, "--data-path"), (args.output, "--output")):
        if given:
            raise InputError(
                f"{args.pte} is a bundled program: it verifies the cases it carries; {option} does not apply"
            )
    bundle = load_bundled_program(args.pte, Runtime.get(num_threads=args.threads))
    results = bundle.verify()
    for r in results:
        if r.passed is None:
            print(f"{r.method_name} test case {r.index}: ran (no expected outputs to verify)")
        else:
            verdict = "pass" if r.passed else "FAIL"
            detail = f": {r.message}" if r.message else ""
            print(f"{r.method_name} test case {r.index}: {verdict}, max abs error {r.max_abs_error:.3g}{detail}")
    failed = sum(r.passed is False for r in results)
    unverified = sum(r.passed is None for r in results)
    counts = [f"{len(results) - failed - unverified} passed", f"{failed} failed"]
    if unverified:
        counts.append(f"{unverified} without expected outputs")
    print(f"{len(results)} test cases of {len(bundle.method_names)} method(s): {', '.join(counts)}")
    return 1 if failed else 0


def cmd_bench(args) -> int:
    """Time a .pte on the NumPy runtime (and a built-in model in PyTorch eager beside it)."""
    rss_before_load = current_rss()
    method = _method(args)
    inputs = load_inputs(args, method.meta)
    rss_loaded = current_rss()
    timings, rss = _timed_runs(args, method, inputs)
    memory = method.memory  # after the runs: the runtime allocations of the last one
    report = {
        "pte": args.pte,
        "method": args.method,
        "model": args.model,
        "threads": method.num_threads,
        "warmup": args.warmup if args.repeat else 0,
        "repeat": args.repeat,
        "inputs": [describe(x) for x in inputs],
        "latency_ms": {side: t.milliseconds() for side, t in timings.items()},
        "memory_bytes": {
            "planned": memory.planned_bytes,
            "runtime": memory.runtime_bytes,
            "peak": memory.planned_bytes + memory.runtime_bytes,
        },
        "process_rss": {
            "peak_bytes": rss.peak,
            "peak_of": "runs" if rss.scope == "block" else "process lifetime",
            "before_load_bytes": rss_before_load,
            "loaded_bytes": rss_loaded,
        },
    }
    print(json.dumps(report, indent=2) if args.json else _bench_text(report, timings))
    return 0


def _timed_runs(args, method, inputs) -> tuple[dict[str, Timing], PeakRss]:
    """The timings of the runs (none with ``--repeat 0``: one untimed run) and the process's peak
    memory during them (eager's model and runs included when it runs beside)."""
    sides = {"torchedge": lambda: method.execute(inputs)}
    with torch_threads(args.threads) if args.model else contextlib.nullcontext(), PeakRss() as rss:
        if args.model:
            sides["eager"] = eager_side(args.model, inputs)  # runs it once: a model that does not fit fails here
        timings = time_calls(sides, args.repeat, args.warmup) if args.repeat else {}
        if not args.repeat:
            method.execute(inputs)  # once, untimed: the memory it takes
    return timings, rss


def _bench_text(report: dict, timings: dict[str, Timing]) -> str:
    names = {"torchedge": "torchedge", "eager": f"eager ({report['model']})"}
    width = max((len(names[side]) for side in timings), default=0)
    memory = report["memory_bytes"]
    lines = [
        f"method '{report['method']}' of {report['pte']}: {', '.join(report['inputs'])}; "
        f"{threads_text(report['threads'])}, {report['warmup']} warm-up and {report['repeat']} timed runs"
    ]
    lines += [f"{names[side]:<{width}}  {latency(t)}" for side, t in timings.items()]
    if not timings:
        lines.append("latency: not timed (--repeat 0: one untimed run)")
    lines.append(_process_memory_text(report))
    lines.append(
        f"torchedge's own: {memory['peak']:,} B = {memory['planned']:,} B planned arenas + "
        f"{memory['runtime']:,} B runtime allocations (constants stay in the mapped .pte; "
        "delegates' memory counts in the process figure only)"
    )
    return "\n".join(lines)


def _process_memory_text(report: dict) -> str:
    """The process's peak RSS during the runs, split into what it held before loading the .pte and
    what loading and running it added; where the operating system cannot tell the runs' own
    peak, the process's since it started."""
    rss = report["process_rss"]
    peak, before, loaded = rss["peak_bytes"], rss["before_load_bytes"], rss["loaded_bytes"]
    if peak is None:
        return "peak memory (process): not measurable on this system"
    if rss["peak_of"] != "runs" or before is None or loaded is None:
        return f"peak memory (process RSS since it started): {_mb(peak)}"
    eager = " (and eager beside it)" if report["model"] else ""
    return (
        f"peak memory (process RSS during the runs): {_mb(peak)}: {_mb(before)} before loading the .pte, "
        f"{_mb(loaded - before, sign=True)} loading it, {_mb(peak - loaded, sign=True)} running it{eager}"
    )


def _mb(nbytes: int, sign: bool = False) -> str:
    return f"{nbytes / 1e6:{'+' if sign else ''},.1f} MB"
