"""The inputs `run` and `bench` call a method with: the arrays of an .npy/.npz file, else random ones.

Random inputs follow the method's signature: floats (bfloat16 and the other ml_dtypes floats
included) from a standard normal, booleans at random, integers in [0, 2) so that any index
input (an embedding's token ids, a gather's indices) stays in range.
"""

from __future__ import annotations

import re

import numpy as np

from torchedge.cli.output import stage
from torchedge.errors import InputError

__all__ = ["load_inputs", "random_inputs"]

_INTEGER_RANGE = (0, 2)  # small enough to be a valid index of any non-empty dimension
_NUMBERED_PREFIXES = ("input_", "arr_")  # our names; np.savez's names of positional arrays


def _is_float(dtype: np.dtype) -> bool:
    if dtype.kind == "f":
        return True
    try:
        import ml_dtypes

        ml_dtypes.finfo(dtype)  # bfloat16, float8_*: floats NumPy itself does not know
        return True
    except (ImportError, ValueError, TypeError):
        return False


def _random_tensor(rng, shape, dtype: np.dtype):
    if _is_float(dtype):
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(*_INTEGER_RANGE, shape).astype(dtype)
    return None


def random_inputs(meta, seed: int) -> list:
    """Inputs that fit the method's signature, from ``seed``; an input they cannot fit is an `InputError`."""
    from torchedge.runtime.method_meta import TensorMeta

    rng = np.random.default_rng(seed)
    inputs: list = []
    for i, m in enumerate(meta.inputs):
        if m is type(None):
            inputs.append(None)
            continue
        if not isinstance(m, TensorMeta):
            raise InputError(
                f"input {i} of method '{meta.name}' is a {m.__name__} scalar, which random inputs "
                "cannot guess: pass all inputs with --inputs"
            )
        tensor = _random_tensor(rng, m.shape, m.dtype)
        if tensor is None:
            raise InputError(
                f"input {i} of method '{meta.name}' is a {m.dtype} tensor, for which random inputs "
                "cannot be made: pass all inputs with --inputs"
            )
        inputs.append(tensor)
    return inputs


def _ordered_names(path: str, names: list[str]) -> list[str]:
    """input_0, input_1, ... or arr_0, arr_1, ... by number; any other names in the order the file stores them."""
    for prefix in _NUMBERED_PREFIXES:
        numbers = [int(n[len(prefix) :]) for n in names if re.fullmatch(rf"{prefix}\d+", n)]
        if names and len(numbers) == len(names):
            if sorted(numbers) != list(range(len(names))):
                raise InputError(
                    f"--inputs: '{path}' has arrays {', '.join(names)}: expected {prefix}0 to {prefix}{len(names) - 1}"
                )
            return sorted(names, key=lambda n: int(n[len(prefix) :]))
    if len(names) > 1:
        stage(
            f"{path}: arrays {', '.join(names)} are not named input_0, input_1, ...; they are taken as "
            "inputs 0, 1, ... in the order the file stores them"
        )
    return names


def _read(path: str) -> list:
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"--inputs: no such file: '{path}'") from None
    except (OSError, ValueError, EOFError) as e:
        raise InputError(f"--inputs: cannot read '{path}' as an .npy or .npz file: {e}") from None
    if isinstance(data, np.ndarray):  # an .npy file: the one input
        return [data]
    with data:
        try:
            return [data[name] for name in _ordered_names(path, list(data.files))]
        except ValueError as e:  # object arrays, which need pickle
            raise InputError(f"--inputs: cannot read '{path}': {e}") from None


def load_inputs(args, meta) -> list:
    """The arrays of ``--inputs`` (an .npy: one input; an .npz: one array per input), else random ones."""
    if not args.inputs:
        return random_inputs(meta, args.seed)
    arrays = _read(args.inputs)
    if len(arrays) != len(meta.inputs):
        raise InputError(
            f"--inputs: '{args.inputs}' holds {len(arrays)} array(s), method '{meta.name}' takes "
            f"{len(meta.inputs)} input(s)"
        )
    # a scalar input comes as a 0-d array
    return [a.item() if isinstance(m, type) and a.ndim == 0 else a for a, m in zip(arrays, meta.inputs)]
