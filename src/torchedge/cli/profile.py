"""`torchedge profile` and `torchedge debug`: where a run's time goes, and which operator goes wrong.

`profile` needs NumPy only (a device-side job); `debug` compares with eager, so it needs torch.
"""

from __future__ import annotations

from torchedge.cli.inputs import load_inputs
from torchedge.cli.loading import load_program
from torchedge.cli.output import stage

__all__ = ["cmd_profile", "cmd_debug"]


def _traced_method(args, debug_buffer_size: int = 0):
    program = load_program(args.pte, args.data_path, enable_etdump=True, debug_buffer_size=debug_buffer_size)
    return program, program.load_method(args.method, num_threads=getattr(args, "threads", None))


def _inspector(program, method_name: str, etrecord=None):
    """An `Inspector` of the program's traced runs, its delegate calls named after their backends."""
    from torchedge.devtools.inspector import Inspector, delegate_backends
    from torchedge.serialize.etdump import serialize_etdump

    tracer = program.event_tracer
    plan = next(p for p in program.pte.program.execution_plan if p.name == method_name)
    return Inspector(
        etdump_data=serialize_etdump(tracer.etdump()),
        debug_buffer_data=tracer.debug_buffer,
        etrecord=etrecord,
        delegate_backends=delegate_backends(plan),
    )


def cmd_profile(args) -> int:
    """Run a .pte ``--repeat`` times with the event tracer on; print the operators by total time."""
    from torchedge.devtools.chrome_trace import write_chrome_trace

    program, method = _traced_method(args)
    inputs = load_inputs(args, method.meta)
    for _ in range(1 + args.repeat):  # the first run warms up: its costs stay out of the table
        method.execute(inputs)
    tracer = program.event_tracer
    if args.etdump:
        program.write_etdump_result_to_file(args.etdump)
    if args.trace:
        write_chrome_trace(tracer.etdump(), args.trace)
    inspector = _inspector(program, args.method)
    runs = [e for b in inspector.event_blocks if b.name == "Execute" for e in b.events if e.name == "Method::execute"]
    times = [t for e in runs for t in e.perf_data.raw][1:]
    p50 = sorted(times)[len(times) // 2] if times else 0.0
    print(f"method '{args.method}' of {args.pte}: {args.repeat} runs after one warm-up, p50 {p50:.3f} ms per run")
    run_total = sum(times) or 1.0
    _print_stats("operator", inspector.operator_stats(skip_runs=1), run_total)
    inside = inspector.operator_stats(skip_runs=1, inside_delegates=True)
    if inside:
        print()
        _print_stats("inside delegates", inside, run_total)
    for path, what in ((args.etdump, "ETDump"), (args.trace, "Chrome trace (open in ui.perfetto.dev)")):
        if path:
            stage(f"wrote {what}: {path}")
    return 0


def _print_stats(title: str, stats, run_total: float) -> None:
    width = max([len(title)] + [len(s.operator) for s in stats])
    print(f"{title:<{width}}  {'calls':>6}  {'total ms':>9}  {'% of run':>8}  {'p50 ms':>8}  {'p90 ms':>8}")
    for s in stats:
        share = 100 * s.total / run_total
        print(f"{s.operator:<{width}}  {s.calls:>6}  {s.total:>9.3f}  {share:>7.1f}%  {s.p50:>8.4f}  {s.p90:>8.4f}")


def _print_gaps(rows, distance: str) -> None:
    """One line per logged operator: its gap to eager, the module it ran in and the user's line."""
    width = max([len("operator")] + [len(", ".join(r.aot_ops)) for r in rows])
    module_width = max([len("module")] + [len(r.module or "") for r in rows])
    print(f"{'instr':>5}  {'operator':<{width}}  {distance:>12}  {'module':<{module_width}}  source")
    for r in rows:
        operator, module = ", ".join(r.aot_ops), r.module or ""
        print(f"{r.instruction_id:>5}  {operator:<{width}}  {r.gap:>12.4e}  {module:<{module_width}}  {r.source or ''}")


def cmd_debug(args) -> int:
    """Run a .pte logging every intermediate output; compare them with eager through an ETRecord."""
    from torchedge.devtools.etrecord import parse_etrecord

    etrecord = parse_etrecord(args.etrecord)
    program, method = _traced_method(args, args.debug_buffer_size)
    stage("runs unfused: logging every intermediate value needs every instruction's own (no load-time fusion)")
    if args.inputs:
        inputs = load_inputs(args, method.meta)
    else:
        from torchedge.devtools.inspector import representative_inputs

        inputs = list(representative_inputs(etrecord, args.method))
    method.execute(inputs)
    dropped = program.event_tracer.dropped_values
    if dropped:
        stage(f"{dropped} values did not fit the debug buffer: raise --debug-buffer-size")
    inspector = _inspector(program, args.method, etrecord)
    _print_gaps(inspector.numeric_gap_rows(args.distance, args.method, inputs), args.distance.upper())
    divergence = inspector.first_divergence(args.method, inputs)
    if divergence is None:
        print("first divergence: none (every logged operator agrees with eager on its inputs)")
        return 0
    print(f"first divergence: {divergence}")
    return 1
