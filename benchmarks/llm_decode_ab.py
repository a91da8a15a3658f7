"""Decode tokens/s of a float32 and an 8da4w ONNX Runtime export of one LLM, alternated in one process
(with --executorch also torchedge's and ExecuTorch's XNNPACK 8da4w programs on ExecuTorch's runtime).

Usage: python benchmarks/llm_decode_ab.py [--model smollm2-135m] [--cache DIR] [--rounds 5]
                                          [--prompt 16] [--new 16] [--max-seq-len 128] [--executorch]
                                          [--baseline-cache DIR] [--json PATH]

The model has SmolLM2's shapes and random weights (`llm.write_model`); the ORT sides are
``torchedge export DIR --recipe onnxruntime [--qlinear 8da4w]``, the XNNPACK ones ``--recipe xnnpack
--qlinear 8da4w`` and ExecuTorch's own lowering of the same torchao model (`llm.compile_executorch`),
each in a child process, kept in ``--cache`` (exports at 135M take minutes) and reused while the
directory's config is the same. ``--baseline-cache DIR`` also runs the ORT programs already
exported to another cache (an earlier version of the lowering, say) as sides of the same run.
Each round measures the single-thread read bandwidth (`llm.bandwidth_gb_s`), then generates once
with each side, in alternating order, one thread; the table gives each side's median decode
tokens/s, the median over rounds of the per-round ratio, the median over rounds of the fraction
of that round's memory-bandwidth bound (bandwidth / bytes of weights one token reads,
`llm.weight_bytes`), the load average seen during the run (the machine may be shared), the
delegate calls and the portable instructions one decoded token runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import _common  # noqa: E402  (pins native thread pools to one thread)
import llm  # noqa: E402

# side -> (llm.py's side that compiles it, the runtime that runs it: te or et)
SIDES = {"ORT f32": ("te + ORT f32", "te"), "ORT 8da4w": ("te + ORT 8da4w", "te")}
EXECUTORCH_SIDES = {
    "te XNNPACK 8da4w on ET": ("te + XNNPACK 8da4w", "et"),
    "ET's XNNPACK 8da4w on ET": (llm.ET_SIDE, "et"),
}


def exports(model: str, cache: Path, max_seq_len: int, sides: dict) -> dict[str, Path]:
    """The cached .pte of each side, exported (in a child process) when missing."""
    directory = cache / model
    if not (directory / "config.json").exists():
        llm.write_model(model, directory)
    paths = {}
    for side, (compiled_as, _) in sides.items():
        slug = compiled_as.replace(" + ", "_").replace(" ", "_")
        path = cache / f"{model}_{slug}_{max_seq_len}.pte"
        if not path.exists():
            seconds, _ = llm.compile_side(compiled_as, directory, path, max_seq_len)
            print(f"  {side}: exported in {seconds:.0f} s", flush=True)
        paths[side] = path
    return paths


def step_counts(path: Path) -> tuple[int, int]:
    """(delegate calls, kernel calls) of one run of the program's forward."""
    from torchedge.schema.program import DelegateCall, KernelCall
    from torchedge.serialize import deserialize_pte

    plan = next(p for p in deserialize_pte(path.read_bytes()).program.execution_plan if p.name == "forward")
    kinds = [type(i.instr_args) for chain in plan.chains for i in chain.instructions]
    return kinds.count(DelegateCall), kinds.count(KernelCall)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(llm.SHAPES), default="smollm2-135m")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/torchedge_llm_decode_ab"), help="export cache")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--new", type=int, default=16, help="new tokens")
    parser.add_argument("--max-seq-len", type=int, default=128, help="KV-cache positions")
    parser.add_argument(
        "--executorch", action="store_true", help="also the XNNPACK 8da4w programs, torchedge's and ExecuTorch's"
    )
    parser.add_argument(
        "--baseline-cache", type=Path, help="also run the ORT exports cached in this directory (not re-exported)"
    )
    _common.add_json_option(parser)
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    sides = {**SIDES, **(EXECUTORCH_SIDES if args.executorch else {})}
    args.cache.mkdir(parents=True, exist_ok=True)
    paths = exports(args.model, args.cache, args.max_seq_len, sides)
    if args.baseline_cache is not None:
        baseline = {f"{side} (baseline)": value for side, value in SIDES.items()}
        found = {side: args.baseline_cache / paths[side[: -len(" (baseline)")]].name for side in baseline}
        missing = [str(path) for path in found.values() if not path.exists()]
        if missing:
            parser.error(f"--baseline-cache has no export {', '.join(missing)}")
        sides.update(baseline)
        paths.update(found)
    ids = list(range(3, 3 + args.prompt))
    rates: dict[str, list[float]] = {side: [] for side in sides}
    tokens: dict[str, list[int]] = {}
    loads, bandwidths = [], []
    with threadpool_limits(1):
        generators = {side: llm.make_generator(sides[side][1], str(paths[side]), args.max_seq_len) for side in sides}
        for generator in generators.values():
            generator.generate(ids, 2)  # page the weights in
        for round_ in range(args.rounds):
            bandwidths.append(llm.bandwidth_gb_s())
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for side in order:
                result = generators[side].generate(ids, args.new)
                rates[side].append(result.decode_tokens_per_second)
                tokens[side] = result.tokens
            loads.append(os.getloadavg()[0])
    base = "ORT f32"
    rows = []
    for side in sides:
        ratio = statistics.median(a / b for a, b in zip(rates[side], rates[base]))
        weights = llm.weight_bytes(args.model, side)
        bound = statistics.median(rate * weights / (gb_s * 1e9) for rate, gb_s in zip(rates[side], bandwidths))
        delegates, others = step_counts(paths[side])
        rows.append([side, f"{statistics.median(rates[side]):.1f}", f"{ratio:.2f}", f"{bound:.2f}", delegates, others])
    print(f"\n{args.model}, prompt {args.prompt}, {args.new} new, cache {args.max_seq_len}, one thread, ", end="")
    print(f"{args.rounds} alternated rounds, load {min(loads):.1f}-{max(loads):.1f}, ", end="")
    print(f"read bandwidth {statistics.median(bandwidths):.1f} GB/s ({min(bandwidths):.1f}-{max(bandwidths):.1f})")
    headers = ["side", "decode tok/s", f"/ {base}", "/ bound", "delegate calls", "kernel calls"]
    _common.report(headers, rows, args.json)
    if args.executorch:  # the same torchao model lowered by both compilers, run by one runtime
        same = tokens["te XNNPACK 8da4w on ET"] == tokens["ET's XNNPACK 8da4w on ET"]
        print(f"torchedge's and ExecuTorch's XNNPACK 8da4w programs generate the same tokens: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
