"""Decoder-only `transformers` LMs exported with a static KV cache, for token-by-token generation.

`export_causal_lm` wraps a model in `transformers`' ``TorchExportableModuleForDecoderOnlyLM``
and exports ``forward(input_ids [1, T], cache_position [T]) -> logits [1, T, V]`` with ``T``
dynamic; the cache is a set of mutable buffers inside the program. The constant methods are
those ExecuTorch's LLM runner reads. Both torchedge's and ExecuTorch's ``to_edge`` take the
result: ``to_edge(exported.programs, constant_methods=exported.constant_methods)``.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

import torch
from torch.export import Dim, ExportedProgram

from torchedge.errors import ExportError, InputError

__all__ = [
    "ARCHITECTURES",
    "KV_CACHE_MODELS",
    "CausalLMExport",
    "causal_lm_backend_config",
    "compile_causal_lm",
    "demo_tokenizer",
    "eager_greedy",
    "export_causal_lm",
    "load_kv_cache_model",
    "tiny_causal_lm",
]

_LAYERS = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
# architecture -> (config class, model class, size arguments)
_TINY = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(_LAYERS, num_key_value_heads=2)),
    "gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, n_inner=64),
    ),  # n_inner: MLP width
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(_LAYERS, num_key_value_heads=2)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(_LAYERS, num_key_value_heads=2)),
    "phi": ("PhiConfig", "PhiForCausalLM", dict(_LAYERS)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(_LAYERS, num_key_value_heads=1, head_dim=8)),
}
ARCHITECTURES = tuple(_TINY)
KV_CACHE_MODELS = tuple(f"{a}-kv" for a in ARCHITECTURES)  # built-in names for `torchedge export`
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>")  # ids 0, 1, 2 in the tiny models and the demo tokenizer

_DEMO_TEXT = (
    "Once upon a time there was a small model that lived on a phone.",
    "It read one token at a time and remembered every one of them in its cache.",
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you today? I am fine, thank you.",
)


@dataclass(frozen=True)
class CausalLMExport:
    """What `export_causal_lm` produces: methods and constant methods for ``to_edge``, and the module."""

    programs: dict[str, ExportedProgram]
    constant_methods: dict[str, object]
    module: torch.nn.Module  # the module ``programs["forward"]`` was exported from (eager reference)
    max_cache_len: int


def _transformers():
    try:
        return importlib.import_module("transformers")
    except ImportError:
        raise ExportError("causal LMs need the 'transformers' package: pip install transformers") from None


def tiny_causal_lm(architecture: str, *, seed: int = 0, vocab_size: int = 512, max_positions: int = 256):
    """A random-weight, 2-layer, hidden-32 model of ``architecture`` (nothing is downloaded).

    Weights are drawn with ``initializer_range=0.5`` so that logits are far apart: greedy
    choices vary from step to step and are not decided by rounding.
    """
    if architecture not in _TINY:
        raise ExportError(f"unknown architecture '{architecture}': use one of {', '.join(ARCHITECTURES)}")
    tf = _transformers()
    config_name, model_name, sizes = _TINY[architecture]
    config = getattr(tf, config_name)(
        **sizes,
        vocab_size=vocab_size,
        max_position_embeddings=max_positions,
        initializer_range=0.5,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        use_cache=True,
    )
    if architecture == "phi3":
        config.original_max_position_embeddings = max_positions  # no long-context rope scaling
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return getattr(tf, model_name)(config).eval()


def export_causal_lm(
    model, max_cache_len: int, max_prompt_len: int | None = None, decode_method: bool = False
) -> CausalLMExport:
    """Export ``model`` with a static cache of ``max_cache_len`` positions.

    ``forward`` takes 1 to ``max_prompt_len`` (default ``max_cache_len``) tokens per call.
    With ``decode_method``, a second method ``decode`` takes exactly one token: static shapes,
    so it runs faster and delegates whole. The two methods must share the cache: compile
    with `compile_causal_lm` (or ``MemoryPlanningPass(share_mutable_buffers=True)``).
    Sets ``model.generation_config.cache_implementation = "static"``.
    """
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    max_prompt_len = max_cache_len if max_prompt_len is None else max_prompt_len
    if not 2 <= max_prompt_len <= max_cache_len:
        raise ExportError(f"max_prompt_len must be in [2, max_cache_len={max_cache_len}], got {max_prompt_len}")
    model.generation_config.cache_implementation = "static"
    try:
        wrapper = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=max_cache_len)
    except (AssertionError, ValueError) as e:
        raise ExportError(f"{type(model).__name__} cannot be exported with a static cache: {e}") from None
    seq = Dim("seq", max=max_prompt_len)  # one size for both inputs: T tokens at T positions
    captured = _dynamo_captures()
    exported = wrapper.export(
        input_ids=torch.zeros((1, 2), dtype=torch.long),
        cache_position=torch.arange(2, dtype=torch.long),
        dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}},
        strict=True,
    )
    programs = {"forward": exported}
    if decode_method:
        programs["decode"] = wrapper.export(
            input_ids=torch.zeros((1, 1), dtype=torch.long),
            cache_position=torch.zeros(1, dtype=torch.long),
            strict=True,
        )
    _drop_dynamo_captures(captured)
    constants = _constant_methods(model.config.get_text_config(), max_cache_len, max_prompt_len)
    # `wrapper.export` exports `wrapper.model`; `wrapper.forward` drops cache_position, so it is no reference.
    return CausalLMExport(programs, constants, wrapper.model, max_cache_len)


# Strict torch.export leaves each graph that dynamo captured (a module holding every weight of the
# model) as a ``__compiled_fn_*`` global of the module whose frame it traced, for the rest of the process.
_DYNAMO_EXPORT_MODULE = "torch._dynamo.functional_export"
_CAPTURE_PREFIX = "__compiled_fn_"


def _dynamo_captures() -> set[str]:
    module = sys.modules.get(_DYNAMO_EXPORT_MODULE)
    return {name for name in vars(module) if name.startswith(_CAPTURE_PREFIX)} if module else set()


def _drop_dynamo_captures(before: set[str]) -> None:
    """Drop the captures that the exports since ``before`` (`_dynamo_captures`) left: the exported
    programs do not use them, and the weights they hold are freed with the model."""
    module = sys.modules.get(_DYNAMO_EXPORT_MODULE)
    for name in _dynamo_captures() - before:
        delattr(module, name)


def compile_causal_lm(exported: CausalLMExport, partitioner=None):
    """``to_edge`` (then delegation to ``partitioner``, if given) and ``to_executorch`` with the
    methods sharing one cache; returns the `ExecutorchProgramManager`."""
    from torchedge.exir import to_edge_transform_and_lower

    edge = to_edge_transform_and_lower(
        exported.programs, partitioner=partitioner, constant_methods=exported.constant_methods
    )
    return edge.to_executorch(causal_lm_backend_config())


def causal_lm_backend_config():
    """``to_executorch``'s config for a KV-cache program: the methods share one cache, named."""
    from torchedge.exir import ExecutorchBackendConfig
    from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass

    return ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True), emit_mutable_buffer_names=True
    )


def _constant_methods(config, max_cache_len: int, max_prompt_len: int) -> dict[str, object]:
    """ExecuTorch's LLM metadata: max_seq_len is the most tokens per call, max_context_len the cache size."""
    methods: dict[str, object] = {
        "get_max_seq_len": max_prompt_len,
        "get_max_context_len": max_cache_len,
        "get_vocab_size": int(config.vocab_size),
        "use_kv_cache": True,
        "enable_dynamic_shape": True,
    }
    if config.bos_token_id is not None:
        methods["get_bos_id"] = int(config.bos_token_id)
    eos = config.eos_token_id
    if eos is not None:
        methods["get_eos_ids"] = [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]
    return methods


@torch.no_grad()
def eager_greedy(exported: CausalLMExport, prompt_ids, max_new_tokens: int) -> list[int]:
    """Greedy tokens from PyTorch eager on the exported module: the prompt in one call, then one token per call.

    Earlier calls leave stale cache entries behind, at positions after the current one,
    which the causal mask hides.
    """
    module, prompt = exported.module, [int(t) for t in prompt_ids]
    if len(prompt) + max_new_tokens > exported.max_cache_len:
        raise InputError(
            f"{len(prompt)} prompt + {max_new_tokens} new tokens do not fit the cache of "
            f"{exported.max_cache_len} positions"
        )
    logits = module(input_ids=torch.tensor([prompt]), cache_position=torch.arange(len(prompt)))
    tokens = [int(logits[0, -1].argmax())]
    while len(tokens) < max_new_tokens:
        position = len(prompt) + len(tokens) - 1
        logits = module(input_ids=torch.tensor([tokens[-1:]]), cache_position=torch.tensor([position]))
        tokens.append(int(logits[0, -1].argmax()))
    return tokens


def load_kv_cache_model(name: str, max_cache_len: int = 128) -> CausalLMExport:
    """Export a built-in KV-cache model by name (``llama-kv``, ``gpt2-kv``, ...), with a ``decode`` method."""
    if name not in KV_CACHE_MODELS:
        raise ExportError(f"unknown KV-cache model '{name}': use one of {', '.join(KV_CACHE_MODELS)}")
    return export_causal_lm(
        tiny_causal_lm(name.removesuffix("-kv"), max_positions=max_cache_len), max_cache_len, decode_method=True
    )


def demo_tokenizer(vocab_size: int = 512):
    """A byte-level BPE tokenizer trained on a few built-in sentences, with the tiny models' special ids."""
    from torchedge.generation import train_bpe_tokenizer

    return train_bpe_tokenizer(_DEMO_TEXT, vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS)
