"""PyTorch eager beside the runtime (`bench --model`, `check`): its threads, a built-in model's call,
and `user_code`, which reports an exception raised by the user's model code as one line.

Each function imports torch when called, so the command line starts without it.
"""

from __future__ import annotations

import traceback
from contextlib import contextmanager

import numpy as np

from torchedge.cli.output import describe
from torchedge.errors import InputError, TorchEdgeError
from torchedge.user_files import is_user_file

__all__ = ["ModelCodeError", "user_code", "first_line", "torch_threads", "eager_side"]


class ModelCodeError(TorchEdgeError):
    """The user's own model code (its file, its factory, its forward) raised an exception."""


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message, marked when more lines follow (``--debug`` shows them)."""
    lines = str(error).strip().splitlines() or [""]
    return lines[0] + (" [...]" if len(lines) > 1 else "")


def user_frame(error: BaseException) -> str | None:
    """``file:line, in function`` of the innermost frame of ``error``'s traceback outside torch and torchedge."""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if is_user_file(frame.filename):
            return f"{frame.filename}:{frame.lineno}, in {frame.name}"
    return None


@contextmanager
def user_code(what: str):
    """Report an exception raised in the user's model code during the block as a `ModelCodeError`.

    ``what`` names the step (``"the model's forward"``). An exception with no frame of user code
    (torch's own, torchedge's, a missing torch) passes through unchanged.
    """
    try:
        yield
    except TorchEdgeError:
        raise
    except Exception as e:
        if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] == "torch":
            raise
        where = user_frame(e)
        if where is None:
            raise
        raise ModelCodeError(f"{what} raised {type(e).__name__}: {first_line(e)} (at {where})") from e


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
