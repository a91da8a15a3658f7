"""Options several commands share, `--threads` and `--dynamic`, with the checks of their values."""

from __future__ import annotations

import argparse

from torchedge.errors import InputError, TorchEdgeError

__all__ = ["add_threads_option", "add_dynamic_option"]


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


def add_threads_option(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument(
        "--threads",
        metavar="N",
        type=_num_threads,
        default=1,
        help=f"threads of the runtime's kernels and delegates (default: 1){extra}",
    )


def add_dynamic_option(p: argparse.ArgumentParser, extra: str = "") -> None:
    p.add_argument(
        "--dynamic",
        metavar="INPUT:DIM:MIN:MAX",
        type=_dynamic_dim,
        action="append",
        help=f"export dimension DIM of input INPUT as dynamic in [MIN, MAX], e.g. 0:1:2:128; repeatable{extra}",
    )
