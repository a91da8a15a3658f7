"""`torchedge run` and `torchedge bench`: execute and time a .pte on the NumPy runtime.

`torchedge run` given a bundled program (a ``.bpte``, recognised by its ``BP08`` identifier)
verifies it instead: every test case of every method, one line each, exit status 1 if any fails.
"""

from __future__ import annotations

import json

from torchedge.cli.eager import eager_side, torch_threads
from torchedge.cli.inputs import load_inputs
from torchedge.cli.output import describe, latency, summary, threads_text
from torchedge.devtools.timing import Timing, time_calls

__all__ = ["cmd_run", "cmd_bench"]


def cmd_run(args) -> int:
    from torchedge.runtime import Runtime

    if _is_bundled_program(args.pte):
        return _verify_bundled_program(args)
    method = Runtime.get().load_program(args.pte).load_method(args.method, num_threads=args.threads, fuse=args.fuse)
    inputs = load_inputs(args, method.meta)
    outputs = method.execute(inputs)
    for i, out in enumerate(outputs):
        print(f"output {i}: {summary(out)}")
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

    if args.inputs is not None:
        raise InputError(f"{args.pte} is a bundled program: it runs the inputs it carries, not --inputs")
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
    from torchedge.runtime import Runtime

    method = Runtime.get().load_program(args.pte).load_method(args.method, num_threads=args.threads, fuse=args.fuse)
    inputs = load_inputs(args, method.meta)
    sides = {"torchedge": lambda: method.execute(inputs)}
    if args.model is None:
        timings = time_calls(sides, args.repeat, args.warmup)
    else:
        with torch_threads(args.threads):
            sides["eager"] = eager_side(args.model, inputs)
            timings = time_calls(sides, args.repeat, args.warmup)
    memory = method.memory  # after the runs: the runtime allocations of the last one
    report = {
        "pte": args.pte,
        "method": args.method,
        "model": args.model,
        "threads": method.num_threads,
        "warmup": args.warmup,
        "repeat": args.repeat,
        "inputs": [describe(x) for x in inputs],
        "latency_ms": {side: t.milliseconds() for side, t in timings.items()},
        "memory_bytes": {
            "planned": memory.planned_bytes,
            "runtime": memory.runtime_bytes,
            "peak": memory.planned_bytes + memory.runtime_bytes,
        },
    }
    print(json.dumps(report, indent=2) if args.json else _bench_text(report, timings))
    return 0


def _bench_text(report: dict, timings: dict[str, Timing]) -> str:
    names = {"torchedge": "torchedge", "eager": f"eager ({report['model']})"}
    width = max(len(names[side]) for side in timings)
    memory = report["memory_bytes"]
    lines = [
        f"method '{report['method']}' of {report['pte']}: {', '.join(report['inputs'])}; "
        f"{threads_text(report['threads'])}, {report['warmup']} warm-up and {report['repeat']} timed runs"
    ]
    lines += [f"{names[side]:<{width}}  {latency(t)}" for side, t in timings.items()]
    lines.append(
        f"peak memory: {memory['peak']:,} B = {memory['planned']:,} B planned arenas + "
        f"{memory['runtime']:,} B runtime allocations (constants stay in the mapped .pte)"
    )
    return "\n".join(lines)
