"""The `torchedge` command line: export, run, bench, profile, debug, inspect, check, kernels, generate.

`build_parser` declares every command and its options; `main` runs the chosen command and
reports a user error as one line, ``torchedge <command>: error: ...``, with exit status 2
(a usage error too); ``--debug`` shows the full traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys

from torchedge.cli.check import cmd_check
from torchedge.cli.eager import first_line
from torchedge.cli.export import cmd_export
from torchedge.cli.generate import cmd_generate
from torchedge.cli.info import cmd_inspect, cmd_kernels
from torchedge.cli.options import (
    add_debug_option,
    add_dynamic_option,
    add_fuse_option,
    add_threads_option,
    non_negative_float,
    non_negative_int,
    positive_int,
)
from torchedge.cli.profile import cmd_debug, cmd_profile
from torchedge.cli.run import cmd_bench, cmd_run
from torchedge.errors import TorchEdgeError

__all__ = ["build_parser", "main"]

USAGE_ERROR = 2  # a user mistake: argparse's status for a bad command line, ours for a bad file or model
INTERNAL_ERROR = 1
BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command whose reader went away

# A package a command imports on demand -> the extra of torchedge that installs it.
_EXTRAS = {
    "torch": "aot",
    "yaml": "aot",
    "tokenizers": "generation",
    "onnx": "onnxruntime",
    "onnxruntime": "onnxruntime",
    "matplotlib": "plot",
}


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr, with where to find the usage."""

    def error(self, message: str):
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _Version(argparse.Action):
    """``--version``: ``torchedge <version>`` from the installed package's metadata (read only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("torchedge")
        except PackageNotFoundError:
            number = "(version unknown: the package is not installed)"
        print(f"torchedge {number}")
        parser.exit()


_INPUTS_HELP = (
    "an .npy file (the one input) or an .npz file, one array per input: named input_0, input_1, ... "
    "or arr_0, arr_1, ... (np.savez's names), else taken in the order stored (default: random inputs "
    "that fit the method's signature; integers in [0, 2))"
)
_MODEL_HELP = (
    "built-in name (mlp, cnn, mobilenet_v2, llama, resnet18, vit, bert), path/to/file.py:factory or "
    "module:factory, a factory returning (model, example_inputs)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="torchedge", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_Version, help="print torchedge's version and exit")
    add_debug_option(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    _add_commands(sub)
    for command in sub.choices.values():  # --debug after the command too, without resetting one before it
        add_debug_option(command, default=argparse.SUPPRESS)
    return parser


def _add_commands(sub) -> None:

    p = sub.add_parser("export", help="compile a built-in or user model to .pte")
    p.add_argument(
        "model",
        help=f"{_MODEL_HELP}, or a decoder-only LM with a KV cache (llama-kv, gpt2-kv, qwen2-kv, phi3-kv, "
        "phi-kv, gemma-kv: also writes <output>.tokenizer.json)",
    )
    p.add_argument("-o", "--output", help="output .pte path (default: <model>.pte)")
    add_dynamic_option(p)
    p.set_defaults(fn=cmd_export)

    p = sub.add_parser("run", help="execute a .pte with the NumPy runtime, or verify a bundled program (.bpte)")
    p.add_argument(
        "pte", help="the .pte program to run, or a .bpte to verify (every test case; exit status 1 if one fails)"
    )
    p.add_argument("--method", default="forward", help="the method to run (default: forward)")
    p.add_argument("--inputs", metavar="FILE", help=_INPUTS_HELP)
    p.add_argument("--repeat", type=positive_int, default=10, help="timed runs after the first (default: 10)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    add_threads_option(p)
    add_fuse_option(p)
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser(
        "bench",
        help="time a .pte on the NumPy runtime: latency percentiles, peak memory; optionally PyTorch eager beside it",
    )
    p.add_argument("pte", help="the .pte program to time")
    p.add_argument("--method", default="forward", help="the method to time (default: forward)")
    p.add_argument("--inputs", metavar="FILE", help=_INPUTS_HELP)
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="untimed runs first (default: 3)")
    p.add_argument("--repeat", type=positive_int, default=50, help="timed runs (default: 50)")
    p.add_argument(
        "--model",
        help="also time this built-in model (as `torchedge export` names it) in PyTorch "
        "eager on the same inputs and threads, in alternating rounds",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    add_threads_option(p, "; with --model, also PyTorch's")
    add_fuse_option(p)
    p.set_defaults(fn=cmd_bench)

    p = sub.add_parser("profile", help="time every instruction of a .pte: operators by total time, ETDump, trace")
    p.add_argument("pte", help="the .pte program to profile")
    p.add_argument("--method", default="forward", help="the method to profile (default: forward)")
    p.add_argument("--inputs", metavar="FILE", help=_INPUTS_HELP)
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    p.add_argument("--repeat", type=positive_int, default=10, help="timed runs after one warm-up (default: 10)")
    p.add_argument("--trace", metavar="JSON", help="also write a Chrome trace (opens in ui.perfetto.dev)")
    p.add_argument("--etdump", metavar="ETDP", help="also write the ETDump (ExecuTorch's Inspector reads it)")
    add_threads_option(p)
    p.set_defaults(fn=cmd_profile)

    p = sub.add_parser(
        "debug", help="compare every intermediate output of a .pte with eager; name the first diverging operator"
    )
    p.add_argument("pte", help="the .pte program to debug")
    p.add_argument("--etrecord", required=True, help="the ETRecord written when the program was compiled")
    p.add_argument("--method", default="forward", help="the method to debug (default: forward)")
    p.add_argument("--inputs", metavar="FILE", help="inputs as for run (default: the ETRecord's representative inputs)")
    p.add_argument("--distance", choices=["MSE", "L1", "SNR"], default="MSE", help="the gap's measure (default: MSE)")
    p.add_argument(
        "--debug-buffer-size",
        type=positive_int,
        default=256 << 20,
        help="bytes for the logged intermediate outputs (default: 256 MiB)",
    )
    p.set_defaults(fn=cmd_debug)

    p = sub.add_parser("inspect", help="methods, signatures, operators and memory of a .pte")
    p.add_argument("pte", help="the .pte program to describe")
    p.add_argument(
        "--memory", action="store_true", help="the memory plan: per memory id size, lower bound and utilisation"
    )
    p.add_argument("--png", help="with --memory: draw the plan (lifetime x byte offset) to this PNG")
    p.set_defaults(fn=cmd_inspect)

    p = sub.add_parser("check", help="export a model, run it on the runtime, compare with PyTorch eager")
    p.add_argument("model", nargs="?", default="cnn", help=f"{_MODEL_HELP} (default: cnn)")
    p.add_argument("--repeat", type=positive_int, default=10, help="timed runs of each side (default: 10)")
    p.add_argument(
        "--tolerance",
        type=non_negative_float,
        default=1e-4,
        help="largest error allowed, relative to the largest |eager output| (default: 1e-4)",
    )
    add_threads_option(p, "; PyTorch eager gets as many")
    add_fuse_option(p)
    add_dynamic_option(p, " (also checked at MIN and MAX)")
    p.set_defaults(fn=cmd_check)

    p = sub.add_parser("generate", help="generate text with a decoder-only LM .pte (KV cache) on the NumPy runtime")
    p.add_argument("pte", help="the decoder-only LM .pte (as `torchedge export <name>-kv` writes)")
    p.add_argument("--tokenizer", required=True, help="tokenizer.json (the 'tokenizers' package reads it)")
    p.add_argument("--prompt", required=True, help="the text to continue")
    # the generator checks these values itself (one-line TorchEdgeError), for its Python callers as well
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate at most (default: 32)")
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


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.fn(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:
        return _broken_pipe()
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"torchedge {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if args.debug:
            raise
        message, status = _explain(e)
        print(f"torchedge {args.command}: error: {message}", file=sys.stderr)
        return status


def _broken_pipe() -> int:
    """The reader of stdout went away (``torchedge inspect x.pte | head``): stop quietly."""
    try:  # what is left in the buffer would fail again at exit: send it nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a file (a test's capture)
    return BROKEN_PIPE


def _explain(error: Exception) -> tuple[str, int]:
    """One line on ``error`` and the exit status: a user mistake's message, or a bug's type and message."""
    if isinstance(error, ModuleNotFoundError) and error.name:
        package = error.name.split(".")[0]
        extra = _EXTRAS.get(package)
        name = "PyTorch (torch)" if package == "torch" else f"the '{package}' package"
        install = f"pip install 'torchedge[{extra}]'" if extra else f"pip install {package}"
        return f"this command needs {name}, which is not installed: {install}", USAGE_ERROR
    if isinstance(error, TorchEdgeError):
        return str(error), USAGE_ERROR
    if isinstance(error, OSError):  # a file that is missing, unreadable, a directory, a full disk
        if error.filename is not None and error.strerror:
            return f"{error.strerror}: '{error.filename}'", USAGE_ERROR
        return str(error), USAGE_ERROR
    return (
        f"internal error: {type(error).__name__}: {first_line(error)} "
        "(a bug in torchedge; --debug shows the traceback)",
        INTERNAL_ERROR,
    )
