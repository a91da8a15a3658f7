"""The command line's grammar: every command, its options and their help (`build_parser`).

A usage error is one line, ``torchedge <command>: error: ...``, exit status 2, pointing at that
command's help; an unknown option names the closest option of the command (`unrecognized`).
"""

from __future__ import annotations

import argparse
import difflib

from torchedge.cli.check import cmd_check
from torchedge.cli.compare import cmd_compare
from torchedge.cli.export import add_directory_options, cmd_export
from torchedge.cli.generate import cmd_generate
from torchedge.cli.info import cmd_inspect, cmd_kernels
from torchedge.cli.options import (
    add_data_path_option,
    add_debug_option,
    add_dynamic_option,
    add_export_options,
    add_fuse_option,
    add_inputs_options,
    add_threads_option,
    non_negative_float,
    non_negative_int,
    positive_int,
)
from torchedge.cli.profile import cmd_debug, cmd_profile
from torchedge.cli.run import cmd_bench, cmd_run
from torchedge.cli.serve import cmd_serve

__all__ = ["USAGE_ERROR", "build_parser", "unrecognized"]

USAGE_ERROR = 2  # a user mistake: argparse's status for a bad command line, ours for a bad file or model

_MODEL_HELP = (
    "built-in name (mlp, cnn, mobilenet_v2, llama, resnet18, vit, bert), path/to/file.py:factory or "
    "module:factory, a factory returning (model, example_inputs)"
)


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr, with where to find the usage."""

    def error(self, message: str):
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # blame the command they were given to, with its closest options
            command = _command_parser(self, getattr(parsed, "command", None)) or self
            command.error(unrecognized(extras, command))
        return parsed


def _command_parser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return None


def unrecognized(extras: list[str], parser: argparse.ArgumentParser) -> str:
    """``unrecognized arguments: --repeet 3; did you mean --repeat?``: each unknown option's closest."""
    known = [s for action in parser._actions for s in action.option_strings]
    hints = []
    for flag in (e.split("=", 1)[0] for e in extras if e.startswith("-")):
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        if close and close[0] not in hints:
            hints.append(close[0])
    message = f"unrecognized arguments: {' '.join(extras)}"
    return message + (f"; did you mean {' or '.join(hints)}?" if hints else "")


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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="torchedge",
        description="The `torchedge` command line: export, run, bench, profile, debug, inspect, compare, check, "
        "kernels, generate, serve.",
    )
    parser.add_argument("--version", action=_Version, help="print torchedge's version and exit")
    add_debug_option(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for add in (_export, _run, _bench, _profile, _debug, _inspect, _compare, _check, _generate, _serve, _kernels):
        add(sub)
    for command in sub.choices.values():  # --debug after the command too, without resetting one before it
        add_debug_option(command, default=argparse.SUPPRESS)
    return parser


def _export(sub) -> None:
    p = sub.add_parser("export", help="compile a built-in or user model to .pte (a backend, a dtype, quantization)")
    p.add_argument(
        "model",
        help=f"{_MODEL_HELP}, or a decoder-only LM with a KV cache (llama-kv, gpt2-kv, qwen2-kv, phi3-kv, "
        "phi-kv, gemma-kv: also writes <output>.tokenizer.json), or a local transformers model directory "
        "(config.json, weights, tokenizer files: what save_pretrained writes; the task comes from its config: "
        "a decoder-only LM exports with a KV cache for the LLM runners, a masked LM, sequence classifier or "
        "encoder as forward(input_ids, attention_mask); its tokenizer is written to <output>.tokenizer.json)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="output .pte path (default: <name>.pte, <name> the built-in's name, the file's stem of "
        "path/to/file.py:factory, the last component of module:factory, the directory's name)",
    )
    add_dynamic_option(p)
    add_export_options(p)
    _export_llm_options(p)
    p.set_defaults(fn=cmd_export)


def _export_llm_options(p) -> None:
    """optimum-executorch's names for `export`'s options (``--recipe``, ``--qlinear``) and the LM's cache size."""
    from torchedge.cli.recipes import BACKENDS, QLINEAR_RECIPES

    p.add_argument(
        "--recipe",
        choices=list(BACKENDS),
        help="as optimum-executorch's --recipe: the same as --backend (give one of the two)",
    )
    qlinear = "; ".join(f"{name}: {what}" for name, what in QLINEAR_RECIPES.items())
    p.add_argument(
        "--qlinear",
        metavar="SCHEME",
        choices=list(QLINEAR_RECIPES),
        help=f"as optimum-executorch's --qlinear, quantize every nn.Linear (needs torchao): {qlinear}",
    )
    p.add_argument(
        "--qlinear-group-size",
        type=positive_int,
        help="with --qlinear 8da4w: input features per group (default: --group-size, 32)",
    )
    add_directory_options(p)
    p.add_argument(
        "--max-seq-len",
        type=positive_int,
        help="a decoder-only LM (a model directory, a *-kv built-in): positions in its KV cache (default: 128, "
        "at most the model's max_position_embeddings); a model directory's masked LM, classifier or encoder: "
        "tokens per call (default: 32)",
    )


def _run(sub) -> None:
    p = sub.add_parser("run", help="execute a .pte with the NumPy runtime, or verify a bundled program (.bpte)")
    p.add_argument(
        "pte", help="the .pte program to run, or a .bpte to verify (every test case; exit status 1 if one fails)"
    )
    add_inputs_options(p, "run")
    add_data_path_option(p)
    p.add_argument(
        "--repeat",
        type=non_negative_int,
        default=10,
        help="timed runs after the first (default: 10; 0: run once and print no latency)",
    )
    p.add_argument(
        "--output",
        metavar="NPZ",
        help="save the outputs to this .npz (np.savez): output_0, output_1, ...; bfloat16 and the other "
        "ml_dtypes floats widened to float32 (exactly), so np.load reads them without ml_dtypes",
    )
    add_threads_option(p)
    add_fuse_option(p)
    p.set_defaults(fn=cmd_run)


def _bench(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="time a .pte on the NumPy runtime: latency percentiles, peak memory; optionally PyTorch eager beside it",
    )
    p.add_argument("pte", help="the .pte program to time")
    add_inputs_options(p, "time")
    add_data_path_option(p)
    p.add_argument("--warmup", type=non_negative_int, default=3, help="untimed runs first (default: 3)")
    p.add_argument(
        "--repeat",
        type=non_negative_int,
        default=50,
        help="timed runs (default: 50; 0: run once, no warm-up, and report the memory only, no latency)",
    )
    p.add_argument(
        "--model",
        help="also time this built-in model (as `torchedge export` names it) in PyTorch "
        "eager on the same inputs and threads, alternating with torchedge run by run",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    add_threads_option(p, "; with --model, also PyTorch's")
    add_fuse_option(p)
    p.set_defaults(fn=cmd_bench)


def _profile(sub) -> None:
    p = sub.add_parser("profile", help="time every instruction of a .pte: operators by total time, ETDump, trace")
    p.add_argument("pte", help="the .pte program to profile")
    add_inputs_options(p, "profile")
    add_data_path_option(p)
    p.add_argument("--repeat", type=positive_int, default=10, help="timed runs after one warm-up (default: 10)")
    p.add_argument("--trace", metavar="JSON", help="also write a Chrome trace (opens in ui.perfetto.dev)")
    p.add_argument("--etdump", metavar="ETDP", help="also write the ETDump (ExecuTorch's Inspector reads it)")
    add_threads_option(p)
    p.set_defaults(fn=cmd_profile)


def _debug(sub) -> None:
    p = sub.add_parser(
        "debug", help="compare every intermediate output of a .pte with eager; name the first diverging operator"
    )
    p.add_argument("pte", help="the .pte program to debug")
    p.add_argument("--etrecord", required=True, help="the ETRecord written when the program was compiled")
    p.add_argument("--method", default="forward", help="the method to debug (default: forward)")
    p.add_argument("--inputs", metavar="FILE", help="inputs as for run (default: the ETRecord's representative inputs)")
    add_data_path_option(p)
    p.add_argument("--distance", choices=["MSE", "L1", "SNR"], default="MSE", help="the gap's measure (default: MSE)")
    p.add_argument(
        "--debug-buffer-size",
        type=positive_int,
        default=256 << 20,
        help="bytes for the logged intermediate outputs (default: 256 MiB)",
    )
    p.set_defaults(fn=cmd_debug)


def _inspect(sub) -> None:
    p = sub.add_parser("inspect", help="methods, signatures, operators, constants, delegates and memory of a .pte")
    p.add_argument("pte", help="the .pte program to describe")
    add_data_path_option(p, " (inspect says which of the program's external constants each holds)")
    p.add_argument(
        "--memory", action="store_true", help="the memory plan: per memory id size, lower bound and utilisation"
    )
    p.add_argument("--png", help="with --memory: draw the plan (lifetime x byte offset) to this PNG")
    p.set_defaults(fn=cmd_inspect)


def _compare(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="run two .pte programs on the same inputs and compare their outputs (exit status 1 if they differ)",
    )
    p.add_argument("a", metavar="A.pte", help="the reference program")
    p.add_argument("b", metavar="B.pte", help="the program compared with it (same method signature)")
    add_inputs_options(p, "compare")
    add_data_path_option(p, flag="--data-path-a", owner="A.pte")
    add_data_path_option(p, flag="--data-path-b", owner="B.pte")
    p.add_argument(
        "--tolerance",
        type=non_negative_float,
        default=1e-4,
        help="largest max |A - B| allowed per output, relative to the largest |A| (default: 1e-4)",
    )
    add_threads_option(p)
    p.set_defaults(fn=cmd_compare)


def _check(sub) -> None:
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


def _generate(sub) -> None:
    p = sub.add_parser("generate", help="generate text with a decoder-only LM .pte (KV cache) on the NumPy runtime")
    p.add_argument("pte", help="the decoder-only LM .pte (as `torchedge export <name>-kv` writes)")
    p.add_argument("--tokenizer", required=True, help="tokenizer.json (the 'tokenizers' package reads it)")
    add_data_path_option(p)
    p.add_argument("--prompt", help="the text to continue (with --chat: the first user message)")
    p.add_argument(
        "--chat",
        action="store_true",
        help="chat: one user message per line of standard input until its end, the history kept in the cache",
    )
    p.add_argument("--system", help="with --chat: a system message before the conversation")
    p.add_argument(
        "--chat-template",
        metavar="FILE",
        help="with --chat: a Jinja chat template, or a tokenizer_config.json holding one "
        "(default: the one beside the tokenizer, else a plain <|role|> layout)",
    )
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
    p.add_argument(
        "--stop-string",
        metavar="TEXT",
        action="append",
        help="stop when the text contains TEXT (cut before it); repeatable",
    )
    p.add_argument(
        "--stats", action="store_true", help="print ExecuTorch's runner statistics (PyTorchObserver JSON) per reply"
    )
    p.set_defaults(fn=cmd_generate)


def _serve(sub) -> None:
    p = sub.add_parser(
        "serve", help="an OpenAI-compatible HTTP server for a .pte (chat, completions, /v1/run) on the NumPy runtime"
    )
    p.add_argument(
        "pte", help="the program: a decoder-only LM .pte (as `torchedge export <name>-kv` writes) or any .pte"
    )
    p.add_argument(
        "--tokenizer",
        help="tokenizer.json of an LM (default: <stem>.tokenizer.json beside the .pte, else tokenizer.json there)",
    )
    p.add_argument(
        "--chat-template",
        metavar="FILE",
        help="a Jinja chat template, or a tokenizer_config.json holding one (default: the tokenizer_config.json's "
        "beside the tokenizer, else a simple <|role|> template, see docs/serving.md)",
    )
    add_data_path_option(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=non_negative_int, default=8000, help="port to listen on (default: 8000)")
    p.add_argument(
        "--max-concurrency",
        type=positive_int,
        default=1,
        help="requests served at once, each with its own KV cache, one thread each (default: 1)",
    )
    p.add_argument(
        "--max-queue",
        type=non_negative_int,
        default=64,
        help="requests that may wait for a free slot; one more gets HTTP 429 (default: 64)",
    )
    p.add_argument(
        "--queue-timeout",
        type=non_negative_float,
        default=60.0,
        help="seconds a request waits for a slot before HTTP 503 (default: 60)",
    )
    p.add_argument("--model-name", help="the model's id in the API (default: the .pte's file stem)")
    p.add_argument(
        "--log-level", choices=["critical", "error", "warning", "info", "debug"], default="info", help="uvicorn's"
    )
    p.set_defaults(fn=cmd_serve)


def _kernels(sub) -> None:
    p = sub.add_parser(
        "kernels", help="registered kernels; core-ATen coverage of the portable library; a programs' operator list"
    )
    p.add_argument("--coverage", action="store_true", help="every core ATen operator: covered or missing")
    p.add_argument(
        "--dtypes",
        action="store_true",
        help="with --coverage: the dtypes whose kernel matches eager on OpInfo samples (slower)",
    )
    p.add_argument(
        "--oplist",
        nargs="+",
        metavar="PTE",
        help="the operators (and dtypes) these programs need, as ExecuTorch's selected-operators YAML "
        "(selective build; Runtime.get(kernels=YAML); ExecutorchBackendConfig(kernel_set=...))",
    )
    p.add_argument("-o", "--output", metavar="YAML", help="with --oplist: write the YAML here (default: stdout)")
    p.set_defaults(fn=cmd_kernels)
