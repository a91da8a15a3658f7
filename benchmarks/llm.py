"""An LLM exported the way users ship them: `torchedge export DIR` of a transformers directory,
float32 and 8da4w, portable, ONNX Runtime and XNNPACK, against eager and (with --executorch)
ExecuTorch's own XNNPACK lowering.

Usage: python benchmarks/llm.py [--model smollm2-135m|smollm2-360m|tiny] [--prompt 16] [--new 32]
                                [--max-seq-len 128] [--executorch] [--xnnpack-on-torchedge]
                                [--json PATH]

The "te + XNNPACK" sides are torchedge's ``--recipe xnnpack`` exports run by ExecuTorch's runtime
(its XNNPACK kernels): torchedge's runtime interprets XNNPACK payloads in NumPy, a reference
rather than a fast path; --xnnpack-on-torchedge also runs them on torchedge's runtime.

The model has SmolLM2's shapes and random weights (built from a LlamaConfig, saved with
``save_pretrained``). Each side compiles in a process of its own (compile time and peak memory
are that process's) and runs in another (load time, RSS after load, then one generation from the
prompt: prefill and decode tokens/s), one thread everywhere. Decode is also given as a fraction
of the memory-bandwidth bound: single-thread read bandwidth (a NumPy sum over 1 GB) divided by
the bytes of weights one token reads. ExecuTorch's sides (float32, and torchao 8da4w, each through
ExecuTorch's ``to_edge_transform_and_lower`` with its ``XnnpackPartitioner``) take about ten
minutes each to compile at 135M, so they run only with --executorch; the compile peak of each
torchedge side is then also given as a fraction of ExecuTorch's in the same dtype.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402,F401  (pins native thread pools to one thread)
import numpy as np  # noqa: E402

SHAPES = {  # LlamaConfig sizes of SmolLM2
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9),
    "smollm2-360m": dict(hidden_size=960, intermediate_size=2560, num_hidden_layers=32, num_attention_heads=15),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4),  # a smoke run
}
KV_HEADS = {"smollm2-135m": 3, "smollm2-360m": 5, "tiny": 2}
GROUP_SIZE = 32
# side -> (recipe, --qlinear); "eager" and "ET + XNNPACK 8da4w" are not torchedge exports
TORCHEDGE_SIDES = {
    "te portable f32": ("portable", None),
    "te + ORT f32": ("onnxruntime", None),
    "te portable 8da4w": ("portable", "8da4w"),
    "te + ORT 8da4w": ("onnxruntime", "8da4w"),
    "te + XNNPACK f32": ("xnnpack", None),
    "te + XNNPACK 8da4w": ("xnnpack", "8da4w"),
}
ON_EXECUTORCH = ("te + XNNPACK f32", "te + XNNPACK 8da4w")  # torchedge's files that ExecuTorch runs
ON_TORCHEDGE = " on te"  # the suffix of those sides run by torchedge's runtime
ET_SIDE = "ET + XNNPACK 8da4w"
ET_SIDES = {"ET + XNNPACK f32": None, ET_SIDE: "8da4w"}  # side -> --qlinear of ExecuTorch's lowering
RATIOS = [  # (side, baseline) decode ratios printed after the table
    *(("te + ORT 8da4w", base) for base in ("te + ORT f32", "te portable f32", ET_SIDE, "eager f32")),
    ("te + XNNPACK f32", "eager f32"),
    ("te + XNNPACK 8da4w", ET_SIDE),
    ("te + XNNPACK 8da4w", "eager f32"),
    ("te + XNNPACK f32", "ET + XNNPACK f32"),
]
_CLI = "import sys; from torchedge.cli.main import main; sys.exit(main(sys.argv[1:]))"
_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def write_model(name: str, directory: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        **SHAPES[name],
        num_key_value_heads=KV_HEADS[name],
        vocab_size=49152,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).eval().save_pretrained(directory)


# Runs ``python ARGS`` and reports the process's own peak RSS at exit: a child's ru_maxrss also
# counts the parent's peak (Linux records the forked address space's high-water mark at exec).
_WITH_PEAK = """import atexit, runpy, sys
def _peak():
    with open("/proc/self/status") as f:
        sys.stderr.write("".join(line for line in f if line.startswith("VmHWM:")))
atexit.register(_peak)
if sys.argv[1] == "-c":  # python -c CODE ARGS: sys.argv is ["-c", ARGS...]
    code, sys.argv = sys.argv[2], ["-c", *sys.argv[3:]]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
else:  # python SCRIPT ARGS
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _child(args: list[str]) -> tuple[float, float, str]:
    """(seconds, peak RSS in MB, stdout) of a Python child process."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", _WITH_PEAK, *args], env=_ENV, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        errors = err.read()
        if child.returncode:
            raise RuntimeError(f"{' '.join(args[:3])} failed: {errors.strip().splitlines()[-1:]}")
        peaks = [line.split()[1] for line in errors.splitlines() if line.startswith("VmHWM:")]
        return seconds, int(peaks[-1]) / 1024 if peaks else usage.ru_maxrss / 1024, out.read()


def compile_side(side: str, directory: Path, out: Path, max_seq_len: int) -> tuple[float, float]:
    if side in ET_SIDES:
        args = [__file__, "--compile-executorch", str(directory), str(out), str(max_seq_len), ET_SIDES[side] or "-"]
    else:
        recipe, qlinear = TORCHEDGE_SIDES[side.removesuffix(ON_TORCHEDGE)]
        args = ["-c", _CLI, "export", str(directory), "-o", str(out), "--recipe", recipe]
        args += ["--max-seq-len", str(max_seq_len)] + (["--qlinear", qlinear] if qlinear else [])
    seconds, peak, _ = _child(args)
    return seconds, peak


def compile_executorch(directory: str, out: str, max_seq_len: int, qlinear: str | None) -> None:
    """torchao ``qlinear`` (None: float32), then ExecuTorch's own lowering with its XnnpackPartitioner
    (one dynamic forward)."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from torchedge.cli.recipes import quantize_model
    from torchedge.models.causal_lm import export_causal_lm
    from torchedge.models.hf_directory import load_causal_lm, read_directory

    torch.set_num_threads(1)
    model, cache = load_causal_lm(read_directory(directory), "float32", max_seq_len)
    exported = export_causal_lm(quantize_model(model, qlinear, GROUP_SIZE) if qlinear else model, cache)
    edge = to_edge_transform_and_lower(
        exported.programs, partitioner=[XnnpackPartitioner()], constant_methods=exported.constant_methods
    )
    Path(out).write_bytes(edge.to_executorch().buffer)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_generator(kind: str, path: str, max_seq_len: int):
    """A `TextGenerator` over ``path`` on torchedge's runtime (``te``), ExecuTorch's (``et``, one
    thread) or eager transformers (``eager``: ``path`` is the model directory)."""
    if kind == "te":
        from torchedge.generation import TextGenerator
        from torchedge.runtime import Runtime

        return TextGenerator(Runtime.get().load_program(path))
    from generation import EagerProgram, ExecuTorchProgram
    from torchedge.generation import TextGenerator

    if kind == "et":
        _common.one_thread_everywhere()  # ExecuTorch's thread pool (XNNPACK's) starts at one per CPU
        return TextGenerator(ExecuTorchProgram(Path(path).read_bytes(), max_seq_len))
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    model.generation_config.cache_implementation = "static"
    wrapper = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=max_seq_len)
    return TextGenerator(EagerProgram(wrapper.model, max_seq_len))


def measure(kind: str, path: str, max_seq_len: int, prompt: int, new: int) -> None:
    """Load (time, RSS), warm up, generate once; prints a JSON line."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        start = time.perf_counter()
        generator = make_generator(kind, path, max_seq_len)
        load = time.perf_counter() - start
        rss = _rss_mb()
        ids = list(range(3, 3 + prompt))
        generator.generate(ids, 2)  # first calls page the weights in
        result = generator.generate(ids, new)
    record = dict(
        load=load,
        rss=rss,
        prefill=result.prefill_tokens_per_second,
        decode=result.decode_tokens_per_second,
        tokens=result.tokens,
    )
    print(json.dumps(record))


def bandwidth_gb_s() -> float:
    """Single-thread read bandwidth: the best of five NumPy sums over 1 GB."""
    data = np.ones(1 << 28, np.float32)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - start)
    return data.nbytes / best / 1e9


def weight_bytes(name: str, side: str) -> float:
    """Bytes of weights one decoded token reads: the linear layers and the LM head (one embedding
    row is negligible): float32, 4-bit packed two a byte or one a byte (portable), plus group scales
    (float32 and an int8 zero point; XNNPACK's: bfloat16)."""
    s = SHAPES[name]
    h, m, layers = s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"]
    kv = h // s["num_attention_heads"] * KV_HEADS[name]
    params = layers * (2 * h * h + 2 * h * kv + 3 * h * m) + 49152 * h
    if "8da4w" not in side:
        return 4.0 * params
    per_weight = 1.0 if "portable" in side else 0.5
    per_group = 2.0 if "XNNPACK" in side else 5.0
    return params * (per_weight + per_group / GROUP_SIZE)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(SHAPES), default="smollm2-135m")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--new", type=int, default=32, help="new tokens")
    parser.add_argument("--max-seq-len", type=int, default=128, help="KV-cache positions")
    parser.add_argument(
        "--executorch", action="store_true", help=f"also compile and run {' and '.join(ET_SIDES)} (~10 min each)"
    )
    parser.add_argument(
        "--xnnpack-on-torchedge", action="store_true", help="also run the XNNPACK exports on torchedge's runtime"
    )
    parser.add_argument("--compile-executorch", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    _common.add_json_option(parser)
    args = parser.parse_args(argv)
    if args.compile_executorch:
        directory, out, max_seq_len, qlinear = args.compile_executorch
        compile_executorch(directory, out, int(max_seq_len), None if qlinear == "-" else qlinear)
        return 0
    if args.measure:
        kind, path, _ = args.measure
        measure(kind, path, args.max_seq_len, args.prompt, args.new)
        return 0
    bandwidth = bandwidth_gb_s()
    print(f"single-thread read bandwidth: {bandwidth:.1f} GB/s", flush=True)
    rows, tokens = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / args.model
        write_model(args.model, directory)
        sides = [*TORCHEDGE_SIDES, *ET_SIDES] if args.executorch else list(TORCHEDGE_SIDES)
        sides += [side + ON_TORCHEDGE for side in ON_EXECUTORCH if args.xnnpack_on_torchedge]
        for side in [*sides, "eager f32"]:
            pte = Path(tmp) / f"{side.replace(' ', '_').replace('+', '')}.pte"
            try:
                compiled = (float("nan"), float("nan"))
                if side != "eager f32":
                    compiled = compile_side(side, directory, pte, args.max_seq_len)
                    print(f"  {side}: compiled in {compiled[0]:.0f} s", flush=True)
                kind, path = ("eager", directory) if side == "eager f32" else (_runtime(side), pte)
                flags = ["--max-seq-len", str(args.max_seq_len), "--prompt", str(args.prompt), "--new", str(args.new)]
                _, _, out = _child([__file__, "--measure", kind, str(path), "-", *flags])
            except RuntimeError as e:  # report a side that cannot run instead of stopping the run
                print(f"  {side}: {e}", flush=True)
                continue
            run = json.loads(out.strip().splitlines()[-1])
            tokens[side] = run["tokens"]
            bound = bandwidth * 1e9 / weight_bytes(args.model, side)
            size = pte.stat().st_size / 1e6 if pte.exists() else float("nan")
            rows.append(
                [
                    side,
                    *(f"{v:.0f}" if v == v else "-" for v in (*compiled, size)),  # NaN: not compiled
                    f"{run['load']:.2f}",
                    f"{run['rss']:.0f}",
                    f"{run['prefill']:.1f}",
                    f"{run['decode']:.1f}",
                    f"{run['decode'] / bound:.2f}",
                ]
            )
            print(f"  {side}: decode {run['decode']:.1f} tokens/s", flush=True)
    for row in rows:
        reference = "eager f32" if "f32" in row[0] else "te portable 8da4w"
        row.append("yes" if tokens.get(row[0]) == tokens.get(reference) else "no")
    headers = ["side", "compile s", "compile peak MB", ".pte MB", "load s", "RSS MB", "prefill tok/s"]
    headers += ["decode tok/s", "of bound", "same tokens"]
    title = f"{args.model}, prompt {args.prompt}, {args.new} new tokens, cache {args.max_seq_len}, one thread"
    print(f"\n{title}")
    _common.print_table(headers, rows)
    _common.write_json(args.json, {title: (headers, rows)})
    decode = {row[0]: float(row[7]) for row in rows}
    for side, base in RATIOS:
        if side in decode and base in decode:
            print(f"decode, {side} / {base}: {decode[side] / decode[base]:.2f}x")
    peaks = {row[0]: float(row[2]) for row in rows if row[2] != "-"}
    for side in TORCHEDGE_SIDES:
        base = "ET + XNNPACK f32" if "f32" in side else ET_SIDE
        if side in peaks and base in peaks:
            print(f"compile peak, {side} / {base}: {peaks[side] / peaks[base]:.2f}x")
    return 0


def _runtime(side: str) -> str:
    """``et`` for the programs ExecuTorch's runtime runs, else ``te``."""
    return "et" if side in ET_SIDES or side in ON_EXECUTORCH else "te"


if __name__ == "__main__":
    sys.exit(main())
