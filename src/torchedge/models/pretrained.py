"""`export_pretrained`: a local `transformers` model directory to a ``.pte`` and its tokenizer,
with the choices of `torchedge export DIR` (which calls `export_directory`, the one implementation).

The stages (loading, quantizing, torch.export, to_edge, lowering, to_executorch, writing) print a
line with their time on stderr; quantizing shows a bar over the layers when stderr is a terminal.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from torchedge.cli.recipes import (
    BACKENDS,
    DTYPES,
    QEMBEDDING_SCHEMES,
    QLINEAR_TO_QUANTIZE,
    ExportSettings,
    lower_quantized_linears,
    partitioners,
    quantize_model,
    write_data_files,
)
from torchedge.errors import ExportError, TorchEdgeError
from torchedge.models.example_inputs import dynamic_example
from torchedge.models.heap import map_large_blocks
from torchedge.models.progress import Progress
from torchedge.models.quantized_embedding import quantize_embedding

if TYPE_CHECKING:
    from torchedge.exir import ExecutorchProgramManager

__all__ = ["ExportedDirectory", "export_directory", "export_pretrained"]


@dataclass(frozen=True)
class ExportedDirectory:
    """What `export_directory` wrote: the ``.pte``, its program manager, the tokenizer (None: none)."""

    output: Path
    program: ExecutorchProgramManager
    tokenizer: Path | None
    tokenizer_how: str | None
    data_files: list[Path]  # the .ptd of the constants kept outside the program (external_constants)


def export_pretrained(
    path: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    recipe: str = "portable",
    qlinear: str | None = None,
    qlinear_group_size: int = 32,
    qembedding: str | None = None,
    qembedding_group_size: int | None = None,
    max_seq_len: int | None = None,
    dtype: str = "float32",
    external_constants: bool = False,
    quiet: bool = False,
) -> Path:
    """Export the transformers model directory ``path`` (what ``save_pretrained`` writes) to ``output``
    (default: ``<directory name>.pte``) and write its tokenizer to ``<output stem>.tokenizer.json``.

    Args:
        recipe: ``portable``, ``onnxruntime`` or ``xnnpack`` (what runs the operators).
        qlinear: ``8da4w``, ``4w``, ``8w`` or ``8da8w``: quantize every ``nn.Linear`` (needs torchao).
        qlinear_group_size: input features per group of the 4-bit schemes.
        qembedding: ``8w`` (int8 per row) or ``4w`` (int4 per group): quantize the input embedding;
            a head tied to it stays float.
        qembedding_group_size: columns per group of ``qembedding="4w"`` (default: the whole row).
        max_seq_len: a decoder-only LM's KV-cache positions (default 128, at most the model's
            limit); other tasks: tokens per call (default 32).
        dtype: ``float32``, ``float16`` or ``bfloat16``: the weights, activations and KV cache.
        external_constants: the program's portable constants go to ``<output stem>.ptd`` beside
            it (load it with the program: ``data_path=``, ``--data-path``); delegates keep theirs.
        quiet: no progress bar (the stage lines stay).

    Returns the ``.pte`` path. Unknown choices and models the export refuses are `ExportError`.
    """
    for name, value, choices in (
        ("recipe", recipe, BACKENDS),
        ("qlinear", qlinear, QLINEAR_TO_QUANTIZE),
        ("qembedding", qembedding, QEMBEDDING_SCHEMES),
        ("dtype", dtype, DTYPES),
    ):
        if value is not None and value not in choices:
            raise ExportError(f"{name}={value!r}: choose from {', '.join(map(repr, choices))}")
    settings = ExportSettings(
        backend=recipe,
        quantize=QLINEAR_TO_QUANTIZE[qlinear] if qlinear else None,
        group_size=qlinear_group_size,
        dtype=dtype,
        external_constants=external_constants,
        max_seq_len=max_seq_len,
    )
    out = os.fspath(output) if output is not None else _default_output(os.fspath(path))
    written = export_directory(os.fspath(path), out, settings, qembedding, qembedding_group_size, Progress(quiet))
    return written.output


def _default_output(path: str) -> str:
    return f"{os.path.basename(os.path.normpath(path)) or 'model'}.pte"


def export_directory(
    path: str,
    output: str,
    settings: ExportSettings,
    qembedding: str | None = None,
    qembedding_group_size: int | None = None,
    progress: Progress | None = None,
    dynamic: list | None = None,
) -> ExportedDirectory:
    """`export_pretrained` on resolved settings: the program written to ``output``, the tokenizer beside it.
    ``dynamic`` (`torchedge export`'s ``--dynamic``) applies to the plain (non-generation) tasks."""
    from torchedge.models.hf_directory import read_directory, write_tokenizer

    progress = progress or Progress()
    partitioner = partitioners(settings.backend)  # an unwritable backend fails before any work
    map_large_blocks()  # what a stage frees leaves the process: the peak is the most held at once
    with progress.stage(f"loading '{path}' ({settings.dtype})"), _loading_bars(progress.bars):
        directory = read_directory(path)
        model, inputs, cache_len = _load(directory, settings)
    progress.line(f"{directory.architecture}: {directory.task}")
    if dynamic and cache_len:
        raise ExportError(f"--dynamic does not apply to '{path}': its sequence length is already dynamic")
    if settings.quantize or qembedding:
        with progress.stage("quantizing"):
            _quantize(model, settings, qembedding, qembedding_group_size, progress)
    with progress.stage("torch.export"):
        exported = _export(model, inputs, cache_len, dynamic or [])
    del model, inputs  # each stage's result holds what the next one needs; nothing else is kept
    with progress.stage("to_edge"):
        edge = _to_edge(exported)
    del exported
    gc.collect()  # the model's reference cycles: the weights that to_edge folded into new constants go now
    if partitioner:
        with progress.stage(f"lowering to {settings.backend}"):
            edge = edge.to_backend(partitioner)
    with progress.stage("to_executorch"):
        program = _to_executorch(edge, cache_len, settings.external_constants)
    del edge
    tokenizer = Path(f"{os.path.splitext(output)[0]}.tokenizer.json")
    with progress.stage(f"writing {output}"):
        program.save(output)  # the parts of the file one after another: no copy of it in memory
        if partitioner and cache_len:
            _check_tokens_per_call(output, cache_len, settings.backend)
        data_files = write_data_files(program, output)
        how = write_tokenizer(directory.path, str(tokenizer))
    return ExportedDirectory(Path(output), program, tokenizer if how else None, how, data_files)


@contextmanager
def _loading_bars(shown: bool) -> Iterator[None]:
    """transformers' own loading bar only where `Progress` shows bars."""
    try:
        from transformers.utils import logging
    except ImportError:  # read_directory says that transformers is needed
        yield
        return
    was = logging.is_progress_bar_enabled()
    (logging.enable_progress_bar if shown else logging.disable_progress_bar)()
    try:
        yield
    finally:
        (logging.enable_progress_bar if was else logging.disable_progress_bar)()


def _load(directory, settings: ExportSettings):
    """``(module, example inputs or None, cache positions or None)``: a causal LM has a cache."""
    from torchedge.models.hf_directory import load_causal_lm, load_plain_model

    if directory.task == "text-generation":
        model, cache_len = load_causal_lm(directory, settings.dtype, settings.max_seq_len)
        return model, None, cache_len
    module, inputs = load_plain_model(directory, settings.max_seq_len, settings.dtype)
    return module, inputs, None


def _quantize(model, settings: ExportSettings, qembedding, qembedding_group_size, progress: Progress) -> None:
    target = model if hasattr(model, "get_input_embeddings") else model.model  # a plain export's wrapper
    if qembedding:
        progress.line(quantize_embedding(target, qembedding, qembedding_group_size))
    if settings.quantize:
        quantize_model(model, settings.quantize, settings.group_size, each=progress.bar)
        lowered = lower_quantized_linears(model, settings.backend)
        if lowered:
            progress.line(f"{lowered} quantized linear layers as ONNX Runtime MatMulNBits (packed weights)")


def _export(model, inputs, cache_len: int | None, dynamic: list):
    """A `CausalLMExport` (``cache_len`` given) or a plain ExportedProgram."""
    import torch

    from torchedge.devtools.dynamic_inputs import dynamic_shapes
    from torchedge.models.causal_lm import export_causal_lm

    try:
        if cache_len:
            return export_causal_lm(model, cache_len)
        inputs = dynamic_example(dynamic, inputs)
        return torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes(dynamic, len(inputs)))
    except TorchEdgeError:
        raise
    except Exception as e:  # torch.export's refusal of the model's code
        first = (str(e).strip().splitlines() or [""])[0]
        raise ExportError(f"torch.export.export failed: {type(e).__name__}: {first}") from e


def _to_edge(exported):
    from torchedge.exir import to_edge
    from torchedge.models.causal_lm import CausalLMExport

    if isinstance(exported, CausalLMExport):
        return to_edge(exported.programs, constant_methods=exported.constant_methods)
    return to_edge(exported)


def _to_executorch(edge, cache_len: int | None, external_constants: bool):
    import dataclasses

    from torchedge.exir import ExecutorchBackendConfig
    from torchedge.models.causal_lm import causal_lm_backend_config

    config = causal_lm_backend_config() if cache_len else ExecutorchBackendConfig()
    return edge.to_executorch(dataclasses.replace(config, external_constants=external_constants))


def _check_tokens_per_call(path: str, max_cache_len: int, backend: str) -> None:
    """``forward`` of the program written to ``path`` still takes up to ``max_cache_len`` tokens after
    delegation (a lowering that fixes the example's size would make a program that cannot decode one
    token); the file is removed if not."""
    from torchedge.runtime import Runtime

    meta = Runtime.get().load_program(path).metadata("forward").input_tensor_meta(0)
    lowest = getattr(meta, "min_shape", None)  # None: no lower bound recorded (0)
    if tuple(meta.shape) != (1, max_cache_len) or (lowest is not None and tuple(lowest)[1] > 1):
        fixed = list(meta.shape) if lowest is None else f"{list(lowest)} to {list(meta.shape)}"
        os.remove(path)
        raise ExportError(
            f"--recipe {backend}: delegating made forward's input_ids {fixed} instead of [1, 1] to "
            f"[1, {max_cache_len}]: the {backend} lowering does not keep the dynamic sequence length; "
            "export with --recipe portable"
        )
