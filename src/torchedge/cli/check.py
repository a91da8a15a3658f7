"""`torchedge check`: export a model, run it on the NumPy runtime and compare with PyTorch eager."""

from __future__ import annotations

import numpy as np

from torchedge.cli.eager import torch_threads, user_code
from torchedge.cli.export import compile_model
from torchedge.cli.output import stage, summary, threads_text
from torchedge.devtools.timing import time_calls

__all__ = ["cmd_check"]


def cmd_check(args) -> int:
    """Export a model, run it on the NumPy runtime and compare with PyTorch eager."""

    from torchedge.runtime import Runtime

    model, inputs, program = compile_model(args.model, args.dynamic)
    stage(f".pte is {len(program.buffer):,} bytes; loading it with the NumPy runtime")
    method = Runtime.get().load_program(program.buffer).load_method("forward", num_threads=args.threads, fuse=args.fuse)
    ok = True
    with torch_threads(method.num_threads):  # compare like with like: eager gets the runtime's threads
        for sized in _sizes_to_check(inputs, args.dynamic):
            ok &= _check_once(method, model, sized, args)
    print("PASS" if ok else f"FAIL: error above tolerance {args.tolerance:.0e}")
    return 0 if ok else 1


def _sizes_to_check(inputs, dynamic) -> list:
    """The example inputs, plus, for dynamic dimensions, inputs at their smallest and largest sizes."""
    from torchedge.devtools.dynamic_inputs import resize_along

    variants = [inputs]
    for size_of in (lambda d: d.min, lambda d: d.max):
        resized = list(inputs)
        for d in dynamic or []:
            resized[d.input] = resize_along(resized[d.input], d.dim, size_of(d))
        variants.append(tuple(resized))
    unique = {tuple(tuple(t.shape) for t in v): v for v in variants}
    return list(unique.values())


def _check_once(method, model, inputs, args) -> bool:
    import torch

    print(f"inputs: {', '.join(f'{t.dtype}{list(t.shape)}' for t in inputs)}")
    np_inputs = [t.numpy() for t in inputs]
    sides = {"torchedge": lambda: method.execute(np_inputs), "eager": torch.no_grad()(lambda: model(*inputs))}
    outputs = sides["torchedge"]()
    with user_code("the model (in PyTorch eager)"):
        expected = sides["eager"]()
    timings = time_calls(sides, args.repeat, warmup=0)
    expected = _leaves(expected)  # a dict, list or nested output: the program's outputs are its leaves, in order
    if len(outputs) != len(expected):
        print(f"FAIL: the program has {len(outputs)} outputs, eager's result has {len(expected)} values")
    worst = 0.0
    for i, (got, want) in enumerate(zip(outputs, expected)):
        error = _relative_error(np.asarray(got), want)
        worst = max(worst, error)
        print(f"output {i}: {summary(got)}")
        print(f"  eager:  {summary(want)}")
        print(f"  max abs error relative to max |eager| = {error:.2e}")
    print(
        f"latency: torchedge {timings['torchedge'].p50 * 1e3:.3f} ms, eager {timings['eager'].p50 * 1e3:.3f} ms "
        f"(median of {args.repeat}, {threads_text(method.num_threads)} each)"
    )
    return worst <= args.tolerance and len(outputs) == len(expected)


def _leaves(result) -> list[np.ndarray]:
    """Eager's result as the list of arrays the program returns (pytree leaves, in pytree order)."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [np.asarray(v.detach().numpy() if isinstance(v, torch.Tensor) else v) for v in tree_leaves(result)]


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (0 for empty outputs; inf for a shape mismatch)."""
    if got.shape != want.shape:
        return float("inf")
    if want.size == 0:
        return 0.0
    got, want = got.astype(np.float64), want.astype(np.float64)
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-12)
