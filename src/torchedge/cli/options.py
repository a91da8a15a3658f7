"""Options several commands share (`--threads`, `--dynamic`, `--debug`, `--data-path`, the inputs, the
export settings) and the checks of option values.

Each check is an argparse ``type``: a bad value is a usage error (exit status 2, one line), not a traceback.
"""

from __future__ import annotations

import argparse

from torchedge.errors import InputError, TorchEdgeError

__all__ = [
    "add_data_path_option",
    "add_export_options",
    "add_inputs_options",
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


_INPUTS_HELP = (
    "an .npy file (the one input) or an .npz file, one array per input: named input_0, input_1, ... "
    "or arr_0, arr_1, ... (np.savez's names), else taken in the order stored (default: random inputs "
    "that fit the method's signature; integers in [0, 2))"
)


def add_inputs_options(p: argparse.ArgumentParser, verb: str) -> None:
    """``--method``, ``--inputs`` and ``--seed``: which method to ``verb``, on what."""
    p.add_argument("--method", default="forward", help=f"the method to {verb} (default: forward)")
    p.add_argument("--inputs", metavar="FILE", help=_INPUTS_HELP)
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")


def add_data_path_option(
    p: argparse.ArgumentParser, extra: str = "", flag: str = "--data-path", owner: str = "the program"
) -> None:
    p.add_argument(
        flag,
        metavar="PTD",
        action="append",
        default=[],
        help=f"a .ptd file holding data {owner} keeps outside itself (external constants, delegate weights "
        f"by key), as `torchedge export --external-constants` writes; repeatable{extra}",
    )


def add_export_options(p: argparse.ArgumentParser) -> None:
    """``export``'s backend, quantization, dtype, ETRecord and external constants."""
    from torchedge.cli.recipes import BACKENDS, DTYPES, QUANTIZE_RECIPES

    backends = "; ".join(f"{name}: {what}" for name, what in BACKENDS.items())
    p.add_argument("--backend", choices=list(BACKENDS), default="portable", help=f"{backends} (default: portable)")
    recipes = "; ".join(f"{name}: {what}" for name, what in QUANTIZE_RECIPES.items())
    p.add_argument(
        "--quantize",
        metavar="RECIPE",
        choices=list(QUANTIZE_RECIPES),
        help=f"quantize first (needs torchao): {recipes}",
    )
    p.add_argument(
        "--group-size",
        type=positive_int,
        default=32,
        help="with --quantize 8da4w: input features per group (default: 32)",
    )
    p.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default="float32",
        help="cast the model and its floating-point example inputs to this dtype before export (default: float32)",
    )
    p.add_argument(
        "--etrecord",
        metavar="PATH",
        help="also write the ETRecord (`torchedge debug` and ExecuTorch's Inspector read it)",
    )
    p.add_argument(
        "--external-constants",
        action="store_true",
        help="keep the weights out of the .pte, by name, in <output>.ptd beside it (run it with --data-path)",
    )


def add_debug_option(p: argparse.ArgumentParser, default=False) -> None:
    """``--debug`` on the top-level parser (``default=False``) and on each command (``SUPPRESS``: keeps the top's)."""
    p.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="on an error, show the full Python traceback instead of the one-line message",
    )
