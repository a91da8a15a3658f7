"""The inputs `run` and `bench` call a method with: the arrays of an .npz file, else random ones."""

from __future__ import annotations

import numpy as np

from torchedge.errors import TorchEdgeError

__all__ = ["load_inputs"]


def _random_inputs(meta, seed: int):
    from torchedge.runtime.method_meta import TensorMeta

    rng = np.random.default_rng(seed)
    inputs = []
    for i, m in enumerate(meta.inputs):
        if not isinstance(m, TensorMeta):
            raise TorchEdgeError(f"input {i} is a {m.__name__} scalar: pass it with --inputs")
        if m.dtype.kind == "f":
            inputs.append(rng.standard_normal(m.shape).astype(m.dtype))
        elif m.dtype.kind == "b":
            inputs.append(rng.random(m.shape) < 0.5)
        else:
            inputs.append(rng.integers(0, 100, m.shape).astype(m.dtype))
    return inputs


def load_inputs(args, meta) -> list:
    """The arrays of ``--inputs`` (an .npz of input_0, input_1, ...), else random ones from ``--seed``."""
    if not args.inputs:
        return _random_inputs(meta, args.seed)
    with np.load(args.inputs) as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[-1]))]
