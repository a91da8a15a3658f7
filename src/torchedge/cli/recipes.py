"""What `torchedge export` can do to a model on its way to a .pte: a dtype, a quantization recipe,
a backend to delegate to.

The names (`BACKENDS`, `DTYPES`, `QUANTIZE_RECIPES`, `QEMBEDDING_SCHEMES`) need no torch: the command line lists them
in its help. The functions import torch (and torchao, for quantization) when called.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from torchedge.errors import ExportError

__all__ = [
    "BACKENDS",
    "DTYPES",
    "QEMBEDDING_SCHEMES",
    "QLINEAR_RECIPES",
    "QUANTIZE_RECIPES",
    "ExportSettings",
    "cast_model",
    "lower_quantized_linears",
    "partitioners",
    "quantize_model",
]

BACKENDS = {
    "portable": "every operator on torchedge's portable kernels (ExecuTorch's portable library on a device)",
    "onnxruntime": "delegate what ONNX Runtime runs to it (OnnxRuntimeBackend), the rest portable",
    "xnnpack": "delegate what XNNPACK runs (float32; 8da4w and 8da8w linear layers) to it (XnnpackBackend, as "
    "ExecuTorch's XnnpackPartitioner), the rest portable",
}
DTYPES = ("float32", "float16", "bfloat16")
QUANTIZE_RECIPES = {
    "int8-dynamic": "int8 weights per output channel, int8 activations quantized per token at run time "
    "(torchao Int8DynamicActivationIntxWeightConfig), for every nn.Linear",
    "8da4w": "int4 weights in groups of --group-size input features, int8 activations quantized per token "
    "at run time (torchao), for every nn.Linear",
    "int8-weight": "int8 weights per output channel, activations left in floating point (torchao "
    "IntxWeightOnlyConfig), for every nn.Linear",
    "int4-weight": "int4 weights in groups of --group-size input features, activations left in floating point "
    "(torchao IntxWeightOnlyConfig), for every nn.Linear",
}
# optimum-executorch's --qlinear names -> the --quantize recipe
QLINEAR_TO_QUANTIZE: dict[str, str] = {
    "8da4w": "8da4w",
    "8da8w": "int8-dynamic",
    "8w": "int8-weight",
    "4w": "int4-weight",
}
QLINEAR_RECIPES = {
    "8da4w": "int4 weights in groups, int8 dynamic activations (--quantize 8da4w)",
    "8da8w": "int8 weights per channel, int8 dynamic activations (--quantize int8-dynamic)",
    "8w": "int8 weights per channel, float activations (--quantize int8-weight)",
    "4w": "int4 weights in groups, float activations (--quantize int4-weight)",
}

QEMBEDDING_SCHEMES = {
    "8w": "int8 weights, one scale per row (ExecuTorch's quantized_decomposed::embedding_byte)",
    "4w": "int4 weights in groups of --qembedding-group-size columns (default: the whole row), one scale per "
    "group (quantized_decomposed::embedding_4bit)",
}


@dataclass
class ExportSettings:
    """`torchedge export`'s options beyond the model: the defaults export as `to_edge` does."""

    backend: str = "portable"
    quantize: str | None = None
    group_size: int = 32
    dtype: str = "float32"
    etrecord: str | None = None
    external_constants: bool = False
    max_seq_len: int | None = None  # a decoder-only LM's cache positions (a plain model's tokens per call)


def partitioners(backend: str) -> list | None:
    """The partitioners of ``backend`` (None: portable)."""
    if backend == "portable":
        return None
    if backend == "onnxruntime":
        from torchedge.backends.onnxruntime import OnnxRuntimePartitioner

        return [OnnxRuntimePartitioner()]
    if backend == "xnnpack":
        from torchedge.backends.xnnpack.aot import XnnpackPartitioner

        return [XnnpackPartitioner()]
    raise ExportError(f"--backend {backend}: unknown backend; choose from {', '.join(BACKENDS)}")


def cast_model(model, inputs: tuple, dtype: str):
    """``model`` and the floating-point tensors of ``inputs`` in ``dtype``; other inputs unchanged."""
    import torch

    if dtype == "float32":
        return model, inputs
    target = getattr(torch, dtype)
    cast = tuple(x.to(target) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
    return model.to(target), cast


def quantize_model(model, recipe: str, group_size: int, each=None):
    """``model`` with its nn.Linear layers quantized in place by torchao's ``quantize_`` (``recipe``
    one of `QUANTIZE_RECIPES`); a layer that ``group_size`` does not fit is an `ExportError`.
    ``each(layers, count, description)``, if given, wraps the iteration over the layers (a progress bar)."""
    import torch

    linears = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    if not linears:
        raise ExportError(f"--quantize {recipe}: the model has no nn.Linear layer, which the recipe quantizes")
    if recipe in ("8da4w", "int4-weight"):
        for name, layer in linears:
            if layer.in_features % group_size:
                raise ExportError(
                    f"--quantize {recipe}: layer '{name}' has {layer.in_features} input features, which groups "
                    f"of --group-size {group_size} do not divide; pick a divisor of every layer's input features"
                )
    from torchao.quantization.quant_api import quantize_

    config = _config(recipe, group_size)
    model.eval()
    if each is None:
        quantize_(model, config)
        return model
    for name, _ in each(linears, len(linears), f"quantizing ({recipe})"):
        quantize_(model, config, filter_fn=lambda module, fqn, name=name: fqn == name)
    return model


def lower_quantized_linears(model, backend: str) -> int:
    """For ``backend`` onnxruntime, the quantized linear layers as ``torchedge_lowbit::linear``
    calls (ONNX Runtime's MatMulNBits on the packed weight); how many. Other backends keep torchao's form."""
    if backend != "onnxruntime":
        return 0
    from torchedge.backends.onnxruntime.lowbit import use_lowbit_linears

    return use_lowbit_linears(model)


def _config(recipe: str, group_size: int):
    import torch
    from torchao.quantization.granularity import PerAxis, PerGroup
    from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig

    if recipe == "int8-dynamic":
        return Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int8, weight_granularity=PerAxis(0))
    if recipe == "8da4w":
        int4 = torch.int4  # type: ignore[attr-defined]  # torch declares it at run time only
        return Int8DynamicActivationIntxWeightConfig(weight_dtype=int4, weight_granularity=PerGroup(group_size))
    if recipe == "int8-weight":
        return IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))
    if recipe == "int4-weight":
        int4 = torch.int4  # type: ignore[attr-defined]
        return IntxWeightOnlyConfig(weight_dtype=int4, granularity=PerGroup(group_size))
    raise ExportError(f"--quantize {recipe}: unknown recipe; choose from {', '.join(QUANTIZE_RECIPES)}")


def write_data_files(program, output: str) -> list[Path]:
    """The .ptd files of ``program``'s external constants beside ``output``: ``<stem>.ptd`` (several:
    ``<stem>.<name>``); the paths written (none without external constants)."""
    stem, files, written = os.path.splitext(output)[0], program.data_files, []
    for name, data in files.items():
        path = Path(f"{stem}.ptd" if len(files) == 1 else f"{stem}.{name}")
        path.write_bytes(data)
        written.append(path)
    return written
