"""The `torchedge` command line: export, run, bench, profile, debug, inspect, compare, check, kernels,
generate, serve.

`build_parser` (`torchedge.cli.parser`) declares every command and its options; `main` runs the
chosen command and reports a user error as one line, ``torchedge <command>: error: ...``, with exit
status 2 (a usage error too); ``--debug`` shows the full traceback instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings

from torchedge.cli.eager import first_line
from torchedge.cli.parser import USAGE_ERROR, build_parser
from torchedge.errors import TorchEdgeError

__all__ = ["build_parser", "main"]

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
    "torchao": "quantize",
}


_NOISY_LOGGERS = ("torch", "torch.utils._pytree", "torch._dynamo", "torch.export", "torchao", "transformers")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    with contextlib.nullcontext() if args.debug else _quiet_libraries():
        return _run(args)


def _run(args) -> int:
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


@contextlib.contextmanager
def _quiet_libraries():
    """Keep the libraries' own notices (torchao loading optional kernels, torch's deprecations and
    tracing remarks, transformers' advice) off the command line; ``--debug`` shows them."""
    # torch sets its own "torch" logger's level when imported: the noisy children get theirs here.
    loggers = [logging.getLogger(name) for name in _NOISY_LOGGERS]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"(torch|torchao|transformers|executorch)(\.|$)")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


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
