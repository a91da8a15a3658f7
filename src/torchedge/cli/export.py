"""`torchedge export`: compile a built-in or user model, or a local transformers model directory, to
a .pte (also the first step of `check`), with a backend, a dtype, a quantization recipe, an ETRecord
and external constants on request."""

from __future__ import annotations

import os

from torchedge.cli.eager import first_line, user_code
from torchedge.cli.models import default_output, load_any_model
from torchedge.cli.options import positive_int
from torchedge.cli.output import stage
from torchedge.cli.recipes import (
    QEMBEDDING_SCHEMES,
    QLINEAR_TO_QUANTIZE,
    ExportSettings,
    cast_model,
    lower_quantized_linears,
    partitioners,
    quantize_model,
    write_data_files,
)
from torchedge.errors import ExportError, TorchEdgeError

__all__ = ["add_directory_options", "compile_model", "cmd_export"]


def add_directory_options(p) -> None:
    """The options of a model directory's export beyond optimum-executorch's linear ones."""
    qembedding = "; ".join(f"{name}: {what}" for name, what in QEMBEDDING_SCHEMES.items())
    p.add_argument(
        "--qembedding",
        metavar="SCHEME",
        choices=list(QEMBEDDING_SCHEMES),
        help=f"a model directory: quantize the input embedding ({qembedding}); a head tied to it stays float",
    )
    p.add_argument("--qembedding-group-size", type=positive_int, help="with --qembedding 4w: columns per group")
    p.add_argument("--quiet", action="store_true", help="a model directory: no progress bar (the stage lines stay)")


def _prepared_model(model_name: str, dynamic: list, settings: ExportSettings):
    """The model and example inputs, cast to the dtype and quantized as ``settings`` say."""
    from torchedge.models.example_inputs import dynamic_example

    stage(f"building model '{model_name}'")
    model, inputs = load_any_model(model_name, max_seq_len=settings.max_seq_len)
    model, inputs = cast_model(model, dynamic_example(dynamic, inputs), settings.dtype)
    if settings.quantize:
        stage(f"quantizing ({settings.quantize})")
        with user_code("the model"):
            model = quantize_model(model, settings.quantize, settings.group_size)
        lower_quantized_linears(model, settings.backend)
    return model, inputs


def compile_model(model_name: str, dynamic: list | None = None, settings: ExportSettings | None = None):
    """The model, its example inputs and its `ExecutorchProgramManager`, with progress on stderr."""
    import torch

    from torchedge.devtools.dynamic_inputs import dynamic_shapes
    from torchedge.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    settings = settings or ExportSettings()
    partitioner = partitioners(settings.backend)  # an unwritable backend fails before any work
    model, inputs = _prepared_model(model_name, dynamic or [], settings)
    stage("torch.export.export")
    try:
        with user_code("the model"):
            exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes(dynamic or [], len(inputs)))
    except TorchEdgeError:
        raise
    except Exception as e:  # torch.export's own refusal, with no frame of the user's code
        raise ExportError(f"torch.export.export failed: {type(e).__name__}: {first_line(e)}") from e
    lowering = f", delegating to {settings.backend}" if partitioner else ""
    stage(f"to_edge (core ATen decomposition{lowering})")
    edge = to_edge_transform_and_lower(
        exported, partitioner=partitioner, generate_etrecord=settings.etrecord is not None
    )
    stage("to_executorch (out variants, memory planning, emit)")
    config = ExecutorchBackendConfig(external_constants=settings.external_constants)
    return model, inputs, edge.to_executorch(config)


def _settings(args) -> ExportSettings:
    backend, quantize = args.backend, args.quantize
    recipe = getattr(args, "recipe", None)
    if recipe:  # optimum-executorch's name for the backend
        if backend not in ("portable", recipe):
            raise TorchEdgeError(f"--recipe {recipe} and --backend {backend}: give one of the two")
        backend = recipe
    qlinear = getattr(args, "qlinear", None)
    if qlinear:  # optimum-executorch's name for the quantization recipe
        mapped = QLINEAR_TO_QUANTIZE[qlinear]
        if quantize not in (None, mapped):
            raise TorchEdgeError(f"--qlinear {qlinear} and --quantize {quantize}: give one of the two")
        quantize = mapped
    return ExportSettings(
        backend=backend,
        quantize=quantize,
        group_size=getattr(args, "qlinear_group_size", None) or args.group_size,
        dtype=args.dtype,
        etrecord=args.etrecord,
        external_constants=args.external_constants,
        max_seq_len=getattr(args, "max_seq_len", None),
    )


def cmd_export(args) -> int:
    settings = _settings(args)
    if os.path.isdir(args.model):
        return _export_directory(args, settings)
    if getattr(args, "qembedding", None):
        raise TorchEdgeError(f"--qembedding applies to a model directory, not to '{args.model}'")
    if args.model.endswith("-kv"):
        return _export_kv_cache_model(args, settings)
    if settings.max_seq_len:
        raise TorchEdgeError(
            f"--max-seq-len does not apply to '{args.model}': it applies to a model directory or a *-kv model"
        )
    model, inputs, program = compile_model(args.model, args.dynamic, settings)
    out = args.output or default_output(args.model)
    program.save(out)
    print(f"wrote {out} ({len(program.buffer):,} bytes{_delegated(program, settings.backend)})")
    _report_data_files(write_data_files(program, out))
    if settings.etrecord:
        _write_etrecord(program, model, inputs, settings.etrecord)
    return 0


def _delegated(program, backend: str) -> str:
    """``, 3 delegates to onnxruntime`` (or that none was made) for a backend other than portable."""
    if backend == "portable":
        return ""
    count = sum(len(plan.delegates or []) for plan in program.program.execution_plan)
    if not count:
        return f"; no operator was delegated to {backend}: every one runs on the portable kernels"
    return f", {count} delegate{'s' if count > 1 else ''} to {backend}"


def _write_etrecord(program, model, inputs: tuple, path: str) -> None:
    """The ETRecord, with the example inputs and eager's outputs on them (what `torchedge debug` replays)."""
    import torch
    from torch.utils._pytree import tree_leaves

    etrecord = program.get_etrecord()
    etrecord.update_representative_inputs(list(inputs))
    with torch.no_grad(), user_code("the model"):
        expected = [v for v in tree_leaves(model(*inputs)) if isinstance(v, torch.Tensor)]
    etrecord.update_reference_outputs([expected])  # one test case of forward, ExecuTorch's layout
    etrecord.save(path)
    print(f"wrote {path} (ETRecord, with the example inputs and eager's outputs)")


def _report_data_files(paths) -> None:
    for path in paths:
        print(f"wrote {path} ({path.stat().st_size:,} bytes of external constants: run with --data-path {path})")


def _export_kv_cache_model(args, settings: ExportSettings) -> int:
    """A built-in decoder-only LM with a static KV cache, and a demo tokenizer.json beside it."""
    from torchedge.models.causal_lm import compile_causal_lm, demo_tokenizer, load_kv_cache_model

    _refuse_for_kv_cache_model(args.model, args.dynamic, settings)
    stage(f"building '{args.model}' and exporting it with a static KV cache")
    exported = load_kv_cache_model(args.model, settings.max_seq_len or 128)
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


def _refuse_for_kv_cache_model(name: str, dynamic, settings: ExportSettings) -> None:
    if dynamic:
        raise TorchEdgeError(f"--dynamic does not apply to '{name}': its sequence length is already dynamic")
    given = [
        flag
        for flag, used in (
            (f"--backend {settings.backend}", settings.backend != "portable"),
            (f"--quantize {settings.quantize}", settings.quantize),
            (f"--dtype {settings.dtype}", settings.dtype != "float32"),
            ("--etrecord", settings.etrecord),
            ("--external-constants", settings.external_constants),
        )
        if used
    ]
    if given:
        raise TorchEdgeError(
            f"{', '.join(given)}: not available for the KV-cache model '{name}' yet (it exports portable, float32)"
        )


def _export_directory(args, settings: ExportSettings) -> int:
    """A local transformers model directory (`torchedge.models.export_pretrained`): the task from its
    config; the tokenizer beside the .pte."""
    from torchedge.models.pretrained import export_directory
    from torchedge.models.progress import Progress

    if settings.etrecord:
        raise TorchEdgeError("--etrecord: not available for a model directory yet")
    out = args.output or default_output(args.model)
    progress = Progress(quiet=getattr(args, "quiet", False))
    qembedding = (getattr(args, "qembedding", None), getattr(args, "qembedding_group_size", None))
    written = export_directory(args.model, out, settings, *qembedding, progress, dynamic=args.dynamic)
    how = written.tokenizer_how
    note = (
        f" and {written.tokenizer} ({how} from the directory)" if how else f"; '{args.model}' has no tokenizer to write"
    )
    program = written.program
    print(f"wrote {out} ({os.path.getsize(out):,} bytes{_delegated(program, settings.backend)}){note}")
    _report_data_files(written.data_files)
    return 0
