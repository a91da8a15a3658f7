"""`torchedge compare`: two .pte programs run on the same inputs, compared output by output.

The inputs are ``--inputs`` or random ones from A's signature (``--seed``). B must take inputs of the
same shapes and kinds; float inputs of another float dtype (a float16 export beside a float32 one) are
cast for B. Each output's error is max |A - B| relative to max |A| (as `check` measures); exit status
0 if every output is within ``--tolerance``, 1 if one is not; a signature mismatch is a usage error.
"""

from __future__ import annotations

import numpy as np

from torchedge.cli.inputs import load_inputs
from torchedge.cli.loading import load_program
from torchedge.cli.output import describe, portable_array, stage
from torchedge.errors import InputError

__all__ = ["cmd_compare", "output_errors"]


def cmd_compare(args) -> int:
    a = load_program(args.a, args.data_path_a, "--data-path-a").load_method(args.method, num_threads=args.threads)
    b = load_program(args.b, args.data_path_b, "--data-path-b").load_method(args.method, num_threads=args.threads)
    _check_signatures(args, a.meta, b.meta)
    inputs = load_inputs(args, a.meta)
    outputs_a = a.execute(inputs)
    outputs_b = b.execute(_inputs_for(b.meta, inputs))
    print(f"method '{args.method}': A {args.a}, B {args.b}; inputs {', '.join(describe(x) for x in inputs)}")
    worst = 0.0
    for i, (x, y) in enumerate(zip(outputs_a, outputs_b)):
        absolute, relative = output_errors(x, y, f"output {i}")
        worst = max(worst, relative)
        verdict = "ok" if relative <= args.tolerance else "ABOVE TOLERANCE"
        print(
            f"output {i}: A {describe(x)}, B {describe(y)}: max abs error {absolute:.3g}, "
            f"relative to max |A| {relative:.3g}: {verdict}"
        )
    if worst <= args.tolerance:
        print(f"PASS: every output within tolerance {args.tolerance:.0e}")
        return 0
    print(f"FAIL: largest relative error {worst:.3g} above tolerance {args.tolerance:.0e}")
    return 1


def _kind(m) -> str:
    """An input or output of a signature as the user reads it: ``float32[4, 32]``, ``int``."""
    from torchedge.runtime.method_meta import TensorMeta

    return f"{m.dtype}{list(m.shape)}" if isinstance(m, TensorMeta) else getattr(m, "__name__", str(m))


def _compatible(x, y) -> bool:
    """Same kind and shape; float tensors of two float dtypes count as the same (inputs are cast)."""
    from torchedge.runtime.method_meta import TensorMeta

    if not (isinstance(x, TensorMeta) and isinstance(y, TensorMeta)):
        return x == y
    return tuple(x.shape) == tuple(y.shape) and (x.dtype == y.dtype or _is_float(x.dtype) and _is_float(y.dtype))


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f" or np.dtype(dtype).kind == "V"  # ml_dtypes floats are kind V


def _check_signatures(args, a, b) -> None:
    for role in ("inputs", "outputs"):
        x, y = getattr(a, role), getattr(b, role)
        if len(x) != len(y) or not all(map(_compatible, x, y)):
            raise InputError(
                f"method '{args.method}' has different {role}: {args.a} ({', '.join(map(_kind, x)) or 'none'}) and "
                f"{args.b} ({', '.join(map(_kind, y)) or 'none'}); compare programs of the same signature"
            )


def _inputs_for(meta, inputs: list) -> list:
    """``inputs`` in B's dtypes (float to float only: `_check_signatures` allowed nothing else)."""
    cast = []
    for m, x in zip(meta.inputs, inputs):
        dtype = getattr(m, "dtype", None)
        if isinstance(x, np.ndarray) and dtype is not None and x.dtype != dtype:
            stage(f"casting a {x.dtype} input to {dtype} for B")
            x = x.astype(dtype)
        cast.append(x)
    return cast


def output_errors(x, y, what: str = "output") -> tuple[float, float]:
    """(max |x - y|, that relative to max |x|); equal infinities and NaNs at the same places agree."""
    x, y = portable_array(x).astype(np.float64), portable_array(y).astype(np.float64)
    if x.shape != y.shape:
        raise InputError(f"{what}: A has shape {list(x.shape)}, B {list(y.shape)}")
    if x.size == 0:
        return 0.0, 0.0
    agree = (x == y) | (np.isnan(x) & np.isnan(y))
    with np.errstate(invalid="ignore"):
        gap = np.where(agree, 0.0, np.abs(x - y))
    absolute = float(np.nan_to_num(gap, nan=np.inf).max())
    finite = np.abs(x[np.isfinite(x)])
    scale = max(float(finite.max()) if finite.size else 0.0, 1e-12)
    return absolute, absolute / scale
