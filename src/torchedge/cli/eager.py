"""PyTorch eager beside the runtime (`bench --model`, `check`): its threads, a built-in model's call.

Each function imports torch when called, so the command line starts without it.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from torchedge.cli.output import describe
from torchedge.errors import InputError

__all__ = ["torch_threads", "eager_side"]


@contextmanager
def torch_threads(num_threads: int):
    """PyTorch eager at ``num_threads`` threads, restored after."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def eager_side(model_name: str, inputs: list):
    """A call of the built-in model in PyTorch eager (no grad) on the same inputs."""
    import torch

    from torchedge.models import load_model

    model, _ = load_model(model_name)
    tensors = [torch.from_numpy(np.array(x)) if isinstance(x, np.ndarray) else x for x in inputs]
    run = torch.no_grad()(lambda: model(*tensors))
    try:
        run()
    except Exception as e:
        raise InputError(
            f"model '{model_name}' does not run on the .pte's inputs "
            f"({', '.join(describe(x) for x in inputs)}): {type(e).__name__}: {e}"
        ) from None
    return run
