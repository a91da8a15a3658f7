"""The `torchedge` command line: export, run, bench, inspect, check, kernels, generate.

`run`, `bench`, `inspect` and `generate` use only the NumPy runtime (`bench --model`
also runs PyTorch eager); `export`, `check` and `kernels --coverage` import torch
when they are called.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager

import numpy as np

from torchedge.devtools.timing import Timing, time_calls
from torchedge.errors import InputError, TorchEdgeError

__all__ = ["main"]


def _stage(message: str) -> None:
    print(f"[torchedge] {message}", file=sys.stderr, flush=True)


def _compile(model_name: str, dynamic: list | None = None):
    import torch

    from torchedge.devtools.dynamic_inputs import dynamic_shapes, resize_along
    from torchedge.exir import to_edge
    from torchedge.models import load_model

    _stage(f"building model '{model_name}'")
    model, inputs = load_model(model_name)
    inputs = list(inputs)
    for d in dynamic or []:  # export traces one size in range; torch.export specialises sizes 0 and 1
        example = inputs[d.input].shape[d.dim] if d.input < len(inputs) and d.dim < inputs[d.input].dim() else None
        if example is not None and not max(d.min, 2) <= example <= d.max:
            inputs[d.input] = resize_along(inputs[d.input], d.dim, min(max(d.min, 2), d.max))
    inputs = tuple(inputs)
    _stage("torch.export.export")
    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes(dynamic or [], len(inputs)))
    _stage("to_edge (core ATen decomposition)")
    edge = to_edge(exported)
    _stage("to_executorch (out variants, memory planning, emit)")
    return model, inputs, edge.to_executorch()


def cmd_export(args) -> int:
    if args.model.endswith("-kv"):
        return _export_kv_cache_model(args)
    _, _, program = _compile(args.model, args.dynamic)
    out = args.output or f"{args.model.split(':')[-1]}.pte"
    program.save(out)
    print(f"wrote {out} ({len(program.buffer):,} bytes)")
    return 0


def _export_kv_cache_model(args) -> int:
    """A built-in decoder-only LM with a static KV cache, and a demo tokenizer.json beside it."""
    from torchedge.models.causal_lm import compile_causal_lm, demo_tokenizer, load_kv_cache_model

    if args.dynamic:
        raise TorchEdgeError(f"--dynamic does not apply to '{args.model}': its sequence length is already dynamic")
    _stage(f"building '{args.model}' and exporting it with a static KV cache")
    exported = load_kv_cache_model(args.model)
    _stage("to_edge, to_executorch (forward prefills, decode takes one token; they share the cache)")
    program = compile_causal_lm(exported)
    out = args.output or f"{args.model}.pte"
    program.save(out)
    tokenizer = f"{os.path.splitext(out)[0]}.tokenizer.json"
    vocab_size = exported.constant_methods["get_vocab_size"]
    assert isinstance(vocab_size, int)  # _constant_methods stores it as an int
    demo_tokenizer(vocab_size=vocab_size).save(tokenizer)
    print(f"wrote {out} ({len(program.buffer):,} bytes) and {tokenizer}")
    return 0


def _random_inputs(meta, seed: int):
    from torchedge.runtime.method_meta import TensorMeta

    rng = np.random.default_rng(seed)
    inputs = []
    for i, m in enumerate(meta.inputs):
        if not isinstance(m, TensorMeta):
            raise TorchEdgeError(f"input {i} is a {m.__name__} scalar: pass it with --inputs")
        if m.dtype.kind == "f":
            inputs.append(rng.standard_normal(m.shape).astype(m.dtype))
        elif m.dtype.kind == "b":
            inputs.append(rng.random(m.shape) < 0.5)
        else:
            inputs.append(rng.integers(0, 100, m.shape).astype(m.dtype))
    return inputs


def _load_inputs(args, meta) -> list:
    """The arrays of ``--inputs`` (an .npz of input_0, input_1, ...), else random ones from ``--seed``."""
    if not args.inputs:
        return _random_inputs(meta, args.seed)
    with np.load(args.inputs) as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[-1]))]


def _latency(timing: Timing) -> str:
    ms = timing.milliseconds()
    return f"p50 {ms['p50']:.3f} ms, p90 {ms['p90']:.3f} ms, min {ms['min']:.3f} ms"


@contextmanager
def _torch_threads(num_threads: int):
    """PyTorch eager at ``num_threads`` threads, restored after."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _summary(array) -> str:
    if not isinstance(array, np.ndarray):
        return repr(array)
    flat = array.reshape(-1)[:6]
    return f"{array.dtype} {list(array.shape)} first values {np.array2string(flat, precision=4)}"


def cmd_run(args) -> int:
    from torchedge.runtime import Runtime

    method = Runtime.get().load_program(args.pte).load_method(args.method, num_threads=args.threads)
    inputs = _load_inputs(args, method.meta)
    outputs = method.execute(inputs)
    for i, out in enumerate(outputs):
        print(f"output {i}: {_summary(out)}")
    timing = time_calls({"torchedge": lambda: method.execute(inputs)}, args.repeat, warmup=0)["torchedge"]
    print(f"latency: {_latency(timing)} ({args.repeat} runs, {_threads_text(method.num_threads)})")
    return 0


def cmd_bench(args) -> int:
    """Time a .pte on the NumPy runtime (and a built-in model in PyTorch eager beside it)."""
    from torchedge.runtime import Runtime

    method = Runtime.get().load_program(args.pte).load_method(args.method, num_threads=args.threads)
    inputs = _load_inputs(args, method.meta)
    sides = {"torchedge": lambda: method.execute(inputs)}
    if args.model is None:
        timings = time_calls(sides, args.repeat, args.warmup)
    else:
        with _torch_threads(args.threads):
            sides["eager"] = _eager_side(args.model, inputs)
            timings = time_calls(sides, args.repeat, args.warmup)
    memory = method.memory  # after the runs: the runtime allocations of the last one
    report = {
        "pte": args.pte,
        "method": args.method,
        "model": args.model,
        "threads": method.num_threads,
        "warmup": args.warmup,
        "repeat": args.repeat,
        "inputs": [_describe(x) for x in inputs],
        "latency_ms": {side: t.milliseconds() for side, t in timings.items()},
        "memory_bytes": {
            "planned": memory.planned_bytes,
            "runtime": memory.runtime_bytes,
            "peak": memory.planned_bytes + memory.runtime_bytes,
        },
    }
    print(json.dumps(report, indent=2) if args.json else _bench_text(report, timings))
    return 0


def _eager_side(model_name: str, inputs: list):
    """A call of the built-in model in PyTorch eager (no grad) on the same inputs."""
    import torch

    from torchedge.models import load_model

    model, _ = load_model(model_name)
    tensors = [torch.from_numpy(np.array(x)) if isinstance(x, np.ndarray) else x for x in inputs]
    run = torch.no_grad()(lambda: model(*tensors))
    try:
        run()
    except Exception as e:
        raise InputError(
            f"model '{model_name}' does not run on the .pte's inputs "
            f"({', '.join(_describe(x) for x in inputs)}): {type(e).__name__}: {e}"
        ) from None
    return run


def _describe(value) -> str:
    return f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__


def _threads_text(num_threads: int) -> str:
    return f"{num_threads} thread{'s' if num_threads > 1 else ''}"


def _bench_text(report: dict, timings: dict[str, Timing]) -> str:
    names = {"torchedge": "torchedge", "eager": f"eager ({report['model']})"}
    width = max(len(names[side]) for side in timings)
    memory = report["memory_bytes"]
    lines = [
        f"method '{report['method']}' of {report['pte']}: {', '.join(report['inputs'])}; "
        f"{_threads_text(report['threads'])}, {report['warmup']} warm-up and {report['repeat']} timed runs"
    ]
    lines += [f"{names[side]:<{width}}  {_latency(t)}" for side, t in timings.items()]
    lines.append(
        f"peak memory: {memory['peak']:,} B = {memory['planned']:,} B planned arenas + "
        f"{memory['runtime']:,} B runtime allocations (constants stay in the mapped .pte)"
    )
    return "\n".join(lines)


def cmd_inspect(args) -> int:
    from torchedge.devtools.describe import describe_memory, describe_program

    print(describe_memory(args.pte, args.png) if args.memory or args.png else describe_program(args.pte))
    return 0


def cmd_check(args) -> int:
    """Export a model, run it on the NumPy runtime and compare with PyTorch eager."""

    from torchedge.runtime import Runtime

    model, inputs, program = _compile(args.model, args.dynamic)
    _stage(f".pte is {len(program.buffer):,} bytes; loading it with the NumPy runtime")
    method = Runtime.get().load_program(program.buffer).load_method("forward", num_threads=args.threads)
    ok = True
    with _torch_threads(method.num_threads):  # compare like with like: eager gets the runtime's threads
        for sized in _sizes_to_check(inputs, args.dynamic):
            ok &= _check_once(method, model, sized, args)
    print("PASS" if ok else f"FAIL: error above tolerance {args.tolerance:.0e}")
    return 0 if ok else 1


def _sizes_to_check(inputs, dynamic) -> list:
    """The example inputs, plus, for dynamic dimensions, inputs at their smallest and largest sizes."""
    from torchedge.devtools.dynamic_inputs import resize_along

    variants = [inputs]
    for size_of in (lambda d: d.min, lambda d: d.max):
        resized = list(inputs)
        for d in dynamic or []:
            resized[d.input] = resize_along(resized[d.input], d.dim, size_of(d))
        variants.append(tuple(resized))
    unique = {tuple(tuple(t.shape) for t in v): v for v in variants}
    return list(unique.values())


def _check_once(method, model, inputs, args) -> bool:
    import torch

    print(f"inputs: {', '.join(f'{t.dtype}{list(t.shape)}' for t in inputs)}")
    np_inputs = [t.numpy() for t in inputs]
    sides = {"torchedge": lambda: method.execute(np_inputs), "eager": torch.no_grad()(lambda: model(*inputs))}
    outputs, expected = sides["torchedge"](), sides["eager"]()
    timings = time_calls(sides, args.repeat, warmup=0)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    worst = 0.0
    for i, (got, want) in enumerate(zip(outputs, expected)):
        want = want.numpy()
        error = float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-12)
        worst = max(worst, error)
        print(f"output {i}: {_summary(got)}")
        print(f"  eager:  {_summary(want)}")
        print(f"  max abs error relative to max |eager| = {error:.2e}")
    print(
        f"latency: torchedge {timings['torchedge'].p50 * 1e3:.3f} ms, eager {timings['eager'].p50 * 1e3:.3f} ms "
        f"(median of {args.repeat}, {_threads_text(method.num_threads)} each)"
    )
    return worst <= args.tolerance and len(outputs) == len(expected)


def cmd_generate(args) -> int:
    """Generate text with a decoder-only LM on the NumPy runtime, printing tokens as they come."""
    from torchedge.generation import TextGenerator, Tokenizer
    from torchedge.runtime import Runtime

    tokenizer = Tokenizer.from_file(args.tokenizer)
    generator = TextGenerator(Runtime.get().load_program(args.pte))
    stop = args.stop
    if stop is None:  # the program's end-of-sequence ids, else the tokenizer's
        stop = generator.eos_ids or [i for i in (tokenizer.eos_id,) if i is not None]
    stream = tokenizer.stream()
    result = generator.generate(
        tokenizer.encode(args.prompt),
        args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        stop_tokens=stop,
        callback=lambda token: print(stream.push(token), end="", flush=True),
    )
    print()
    print(
        f"prefill: {result.prompt_tokens} tokens, {result.prefill_tokens_per_second:.1f} tokens/s; "
        f"decode: {len(result.tokens)} tokens, {result.decode_tokens_per_second:.1f} tokens/s; "
        f"stopped by {result.stopped_by}"
    )
    return 0


def cmd_kernels(args) -> int:
    """List the registered kernels, or the core-ATen coverage of the portable library."""
    if not (args.coverage or args.dtypes):
        from torchedge.kernels.registry import registered_operators

        names = registered_operators()
        print("\n".join(names) + f"\n{len(names)} kernels registered")
        return 0
    from torchedge.devtools.kernel_coverage import coverage, format_coverage

    if args.dtypes:
        _stage("checking every kernel against PyTorch eager on OpInfo samples (under a minute)")
    print(format_coverage(coverage(check_dtypes=args.dtypes), check_dtypes=args.dtypes))
    return 0


def _dynamic_dim(spec: str):
    from torchedge.devtools.dynamic_inputs import parse_dynamic

    try:
        return parse_dynamic(spec)
    except TorchEdgeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _num_threads(value: str) -> int:
    from torchedge.runtime.threads import check_num_threads

    try:
        return check_num_threads(int(value))
    except (ValueError, InputError) as e:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got '{value}'") from e


def _add_threads_option(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument(
        "--threads",
        metavar="N",
        type=_num_threads,
        default=1,
        help=f"threads of the runtime's kernels and delegates (default: 1){extra}",
    )


def _add_dynamic_option(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument(
        "--dynamic",
        metavar="INPUT:DIM:MIN:MAX",
        type=_dynamic_dim,
        action="append",
        help=f"export dimension DIM of input INPUT as dynamic in [MIN, MAX], e.g. 0:1:2:128; repeatable{extra}",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchedge", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("export", help="compile a built-in or user model to .pte")
    p.add_argument(
        "model",
        help="built-in name (mlp, cnn, mobilenet_v2, llama, resnet18, vit, bert), a decoder-only "
        "LM with a KV cache (llama-kv, gpt2-kv, qwen2-kv, phi3-kv, phi-kv, gemma-kv: also "
        "writes <output>.tokenizer.json) or path.py:factory",
    )
    p.add_argument("-o", "--output", help="output .pte path (default: <model>.pte)")
    _add_dynamic_option(p)
    p.set_defaults(fn=cmd_export)

    p = sub.add_parser("run", help="execute a .pte with the NumPy runtime")
    p.add_argument("pte")
    p.add_argument("--method", default="forward")
    p.add_argument("--inputs", help=".npz file with arrays named input_0, input_1, ... (default: random)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    _add_threads_option(p)
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser(
        "bench",
        help="time a .pte on the NumPy runtime: latency percentiles, peak memory; optionally PyTorch eager beside it",
    )
    p.add_argument("pte")
    p.add_argument("--method", default="forward")
    p.add_argument("--inputs", help=".npz file with arrays named input_0, input_1, ... (default: random)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first (default: 3)")
    p.add_argument("--repeat", type=int, default=50, help="timed runs (default: 50)")
    p.add_argument(
        "--model",
        help="also time this built-in model (as `torchedge export` names it) in PyTorch "
        "eager on the same inputs and threads, in alternating rounds",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    _add_threads_option(p, "; with --model, also PyTorch's")
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("inspect", help="methods, signatures, operators and memory of a .pte")
    p.add_argument("pte")
    p.add_argument(
        "--memory", action="store_true", help="the memory plan: per memory id size, lower bound and utilisation"
    )
    p.add_argument("--png", help="with --memory: draw the plan (lifetime x byte offset) to this PNG")
    p.set_defaults(fn=cmd_inspect)

    p = sub.add_parser("check", help="export a model, run it on the runtime, compare with PyTorch eager")
    p.add_argument("model", nargs="?", default="cnn")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--tolerance", type=float, default=1e-4)
    _add_threads_option(p, "; PyTorch eager gets as many")
    _add_dynamic_option(p, " (also checked at MIN and MAX)")
    p.set_defaults(fn=cmd_check)

    p = sub.add_parser("generate", help="generate text with a decoder-only LM .pte (KV cache) on the NumPy runtime")
    p.add_argument("pte")
    p.add_argument("--tokenizer", required=True, help="tokenizer.json (the 'tokenizers' package reads it)")
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy")
    p.add_argument("--top-k", type=int, help="sample among the K most likely tokens")
    p.add_argument("--top-p", type=float, help="sample among the most likely tokens whose probability reaches P")
    p.add_argument("--seed", type=int, help="seed of the sampler: same seed, same text")
    p.add_argument(
        "--stop",
        metavar="ID",
        type=int,
        nargs="+",
        action="extend",
        help="stop at these token ids (default: the program's, else the tokenizer's, end-of-sequence ids)",
    )
    p.set_defaults(fn=cmd_generate)

    p = sub.add_parser("kernels", help="registered kernels; core-ATen coverage of the portable library")
    p.add_argument("--coverage", action="store_true", help="every core ATen operator: covered or missing")
    p.add_argument(
        "--dtypes",
        action="store_true",
        help="with --coverage: the dtypes whose kernel matches eager on OpInfo samples (slower)",
    )
    p.set_defaults(fn=cmd_kernels)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (TorchEdgeError, FileNotFoundError, KeyError) as e:
        print(f"torchedge {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
