"""Options several commands share (`--threads`, `--dynamic`, `--debug`) and the checks of option values.

Each check is an argparse ``type``: a bad value is a usage error (exit status 2, one line), not a traceback.
"""

from __future__ import annotations

import argparse

from torchedge.errors import InputError, TorchEdgeError

__all__ = [
    "add_threads_option",
    "add_dynamic_option",
    "add_debug_option",
    "positive_int",
    "non_negative_int",
    "non_negative_float",
]


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


def _whole_number(value: str, least: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = least - 1
    if number < least:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got '{value}'")
    return number


def positive_int(value: str) -> int:
    """A whole number >= 1 (``--repeat``, ``--top-k``)."""
    return _whole_number(value, 1)


def non_negative_int(value: str) -> int:
    """A whole number >= 0 (``--warmup``, ``--max-new-tokens``)."""
    return _whole_number(value, 0)


def non_negative_float(value: str) -> float:
    """A finite number >= 0 (``--tolerance``, ``--temperature``)."""
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not 0 <= number < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got '{value}'")
    return number


def add_threads_option(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument(
        "--threads",
        metavar="N",
        type=_num_threads,
        default=1,
        help=f"threads of the runtime's kernels and delegates (default: 1){extra}",
    )


def add_fuse_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-fuse",
        dest="fuse",
        action="store_false",
        help="run every instruction as written (default: attention, padded convolutions and max pools "
        "whose indices nobody reads run as fused kernels where the program's dataflow proves it exact)",
    )


def add_dynamic_option(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument(
        "--dynamic",
        metavar="INPUT:DIM:MIN:MAX",
        type=_dynamic_dim,
        action="append",
        help=f"export dimension DIM of input INPUT as dynamic in [MIN, MAX], e.g. 0:1:2:128; repeatable{extra}",
    )


def add_debug_option(p: argparse.ArgumentParser, default=False) -> None:
    """``--debug`` on the top-level parser (``default=False``) and on each command (``SUPPRESS``: keeps the top's)."""
    p.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="on an error, show the full Python traceback instead of the one-line message",
    )
