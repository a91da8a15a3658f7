"""`torchedge export`: compile a built-in or user model to a .pte (also the first step of `check`)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os

from torchedge.cli.eager import first_line, user_code
from torchedge.cli.output import stage
from torchedge.errors import ExportError, TorchEdgeError

__all__ = ["compile_model", "cmd_export", "load_any_model"]

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


def load_any_model(name: str, seed: int = 0):
    """``(model, example_inputs)`` of a built-in model, or of ``path/to/file.py:factory`` / ``module:factory``.

    A missing factory, a factory that returns something else than ``(model, example_inputs)``
    and an exception raised in the user's code are `TorchEdgeError`s with a one-line message.
    """
    import torch

    from torchedge.models import MODEL_NAMES, load_model

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


def _check_dynamic(dynamic: list, inputs: list) -> None:
    """Every ``--dynamic`` names an input the model takes and a dimension that input has."""
    for d in dynamic:
        spec = f"--dynamic {d.input}:{d.dim}:{d.min}:{d.max}"
        if d.input >= len(inputs):
            raise ExportError(f"{spec}: no input {d.input}, the model takes {len(inputs)} input(s)")
        shape = getattr(inputs[d.input], "shape", None)
        if shape is None:
            raise ExportError(f"{spec}: input {d.input} is a {type(inputs[d.input]).__name__}, not a tensor")
        if d.dim >= len(shape):
            raise ExportError(
                f"{spec}: input {d.input} has {len(shape)} dimension(s) (shape {list(shape)}), no dimension {d.dim}"
            )


def compile_model(model_name: str, dynamic: list | None = None):
    """The model, its example inputs and its `ExecutorchProgramManager`, with progress on stderr."""
    import torch

    from torchedge.devtools.dynamic_inputs import dynamic_shapes, resize_along
    from torchedge.exir import to_edge

    stage(f"building model '{model_name}'")
    model, inputs = load_any_model(model_name)
    inputs = list(inputs)
    _check_dynamic(dynamic or [], inputs)
    for d in dynamic or []:  # export traces one size in range; torch.export specialises sizes 0 and 1
        example = inputs[d.input].shape[d.dim]
        if not max(d.min, 2) <= example <= d.max:
            inputs[d.input] = resize_along(inputs[d.input], d.dim, min(max(d.min, 2), d.max))
    inputs = tuple(inputs)
    stage("torch.export.export")
    try:
        with user_code("the model"):
            exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes(dynamic or [], len(inputs)))
    except TorchEdgeError:
        raise
    except Exception as e:  # torch.export's own refusal, with no frame of the user's code
        raise ExportError(f"torch.export.export failed: {type(e).__name__}: {first_line(e)}") from e
    stage("to_edge (core ATen decomposition)")
    edge = to_edge(exported)
    stage("to_executorch (out variants, memory planning, emit)")
    return model, inputs, edge.to_executorch()


def cmd_export(args) -> int:
    if args.model.endswith("-kv"):
        return _export_kv_cache_model(args)
    _, _, program = compile_model(args.model, args.dynamic)
    out = args.output or f"{args.model.split(':')[-1]}.pte"
    program.save(out)
    print(f"wrote {out} ({len(program.buffer):,} bytes)")
    return 0


def _export_kv_cache_model(args) -> int:
    """A built-in decoder-only LM with a static KV cache, and a demo tokenizer.json beside it."""
    from torchedge.models.causal_lm import compile_causal_lm, demo_tokenizer, load_kv_cache_model

    if args.dynamic:
        raise TorchEdgeError(f"--dynamic does not apply to '{args.model}': its sequence length is already dynamic")
    stage(f"building '{args.model}' and exporting it with a static KV cache")
    exported = load_kv_cache_model(args.model)
    stage("to_edge, to_executorch (forward prefills, decode takes one token; they share the cache)")
    program = compile_causal_lm(exported)
    out = args.output or f"{args.model}.pte"
    program.save(out)
    tokenizer = f"{os.path.splitext(out)[0]}.tokenizer.json"
    vocab_size = exported.constant_methods["get_vocab_size"]
    assert isinstance(vocab_size, int)  # _constant_methods stores it as an int
    demo_tokenizer(vocab_size=vocab_size).save(tokenizer)
    print(f"wrote {out} ({len(program.buffer):,} bytes) and {tokenizer}")
    return 0
