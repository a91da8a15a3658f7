"""Which model a name on the command line means: a built-in, ``path/to/file.py:factory`` or
``module:factory``; and the default name of the .pte `torchedge export` writes for it."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os

from torchedge.cli.eager import user_code
from torchedge.errors import ExportError

__all__ = ["load_any_model", "default_output"]

_FACTORY_HELP = "a factory returns (model, example_inputs): the nn.Module and a tuple of example input tensors"


def _user_module(source: str, name: str):
    """The module ``source`` names: a path to a .py file, else an importable module name."""
    if os.path.isfile(source):
        spec = importlib.util.spec_from_file_location("_torchedge_user_model", source)
        if spec is None or spec.loader is None:
            raise ExportError(f"model '{name}': cannot load '{source}' as a Python module")
        module = importlib.util.module_from_spec(spec)
        with user_code(f"loading '{source}'"):
            spec.loader.exec_module(module)
        return module
    if source.endswith(".py") or os.sep in source or not source.replace(".", "").replace("_", "").isalnum():
        raise ExportError(f"model '{name}': no such file: '{source}'")
    try:
        with user_code(f"importing '{source}'"):
            return importlib.import_module(source)
    except ModuleNotFoundError as e:
        if e.name != source.split(".")[0] and e.name != source:
            raise
        raise ExportError(f"model '{name}': '{source}' is neither a file nor an importable module") from None


def load_any_model(name: str, seed: int = 0, max_seq_len: int | None = None):
    """``(model, example_inputs)`` of a built-in model, of ``path/to/file.py:factory`` / ``module:factory``,
    or of a local transformers model directory (``forward(input_ids, attention_mask)`` over
    ``max_seq_len`` tokens, `torchedge.models.hf_directory.load_plain_model`).

    A missing factory, a factory that returns something else than ``(model, example_inputs)``
    and an exception raised in the user's code are `TorchEdgeError`s with a one-line message.
    """
    import torch

    from torchedge.models import MODEL_NAMES, load_model

    if os.path.isdir(name):
        from torchedge.models.hf_directory import load_plain_model, read_directory

        return load_plain_model(read_directory(name), max_seq_len)
    if name in MODEL_NAMES or ":" not in name:
        return load_model(name, seed)  # a built-in, or an unknown name: its ExportError lists the built-ins
    source, factory_name = name.rsplit(":", 1)
    module = _user_module(source, name)
    factory = getattr(module, factory_name, None)
    if factory is None:
        defined = sorted(
            n
            for n, v in vars(module).items()
            if inspect.isfunction(v) and v.__module__ == module.__name__ and not n.startswith("_")
        )[:12]
        raise ExportError(
            f"model '{name}': '{source}' has no factory '{factory_name}' "
            f"(its functions: {', '.join(defined) or 'none'})"
        )
    if not callable(factory):
        raise ExportError(f"model '{name}': '{factory_name}' is a {type(factory).__name__}, not a function")
    torch.manual_seed(seed)
    with user_code(f"factory '{factory_name}'"):
        result = factory()
    if isinstance(result, torch.nn.Module):
        raise ExportError(
            f"model '{name}': factory '{factory_name}' returned only the model ({type(result).__name__}); "
            f"{_FACTORY_HELP}"
        )
    if not (isinstance(result, (tuple, list)) and len(result) == 2 and callable(result[0])):
        raise ExportError(
            f"model '{name}': factory '{factory_name}' returned a {type(result).__name__}; {_FACTORY_HELP}"
        )
    model, inputs = result
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)):
        raise ExportError(
            f"model '{name}': factory '{factory_name}' returned example inputs of type {type(inputs).__name__}; "
            f"{_FACTORY_HELP}"
        )
    return model, tuple(inputs)


def default_output(name: str, suffix: str = ".pte") -> str:
    """``<name>.pte`` for a built-in, ``<stem>.pte`` for ``path/to/<stem>.py:factory``, ``<last>.pte``
    for ``package.<last>:factory`` (the file or module, not the factory: ``make.pte`` says nothing),
    ``<directory's name>.pte`` for a model directory."""
    if os.path.isdir(name):
        return f"{os.path.basename(os.path.normpath(os.path.abspath(name)))}{suffix}"
    if ":" not in name:
        return f"{name}{suffix}"
    source = name.rsplit(":", 1)[0]
    if source.endswith(".py") or os.sep in source or os.path.isfile(source):
        return f"{os.path.splitext(os.path.basename(source))[0]}{suffix}"
    return f"{source.rsplit('.', 1)[-1]}{suffix}"
