"""The `torchedge` command line: export, run, bench, inspect, check, kernels, generate.

`build_parser` declares every command and its options; `main` runs the chosen command and
reports a user error as ``torchedge <command>: error: ...`` with exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from torchedge.cli.check import cmd_check
from torchedge.cli.export import cmd_export
from torchedge.cli.generate import cmd_generate
from torchedge.cli.info import cmd_inspect, cmd_kernels
from torchedge.cli.options import add_dynamic_option, add_threads_option
from torchedge.cli.run import cmd_bench, cmd_run
from torchedge.errors import TorchEdgeError

__all__ = ["build_parser", "main"]


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
    add_dynamic_option(p)
    p.set_defaults(fn=cmd_export)

    p = sub.add_parser("run", help="execute a .pte with the NumPy runtime")
    p.add_argument("pte")
    p.add_argument("--method", default="forward")
    p.add_argument("--inputs", help=".npz file with arrays named input_0, input_1, ... (default: random)")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    add_threads_option(p)
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
    add_threads_option(p, "; with --model, also PyTorch's")
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
    add_threads_option(p, "; PyTorch eager gets as many")
    add_dynamic_option(p, " (also checked at MIN and MAX)")
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
