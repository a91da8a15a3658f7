"""A local `transformers` model directory (what ``save_pretrained`` writes: ``config.json``,
weights, tokenizer files) as something `torchedge export` compiles.

The task comes from the config's ``architectures`` (else its ``model_type``):

- ``text-generation``: a decoder-only LM (``*ForCausalLM``, ``*LMHeadModel``), exported with a
  static KV cache by `torchedge.models.causal_lm.export_causal_lm`, ExecuTorch's LLM conventions;
- ``fill-mask`` (``*ForMaskedLM``), ``text-classification`` (``*ForSequenceClassification``) and
  ``feature-extraction`` (an encoder-only ``*Model``, e.g. ``BertModel``): a plain
  ``forward(input_ids [1, S], attention_mask [1, S]) -> logits`` (or ``last_hidden_state``).

Nothing is downloaded: ``from_pretrained`` reads the directory only.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass

import torch

from torchedge.errors import ExportError

__all__ = [
    "TASKS",
    "HFDirectory",
    "default_max_seq_len",
    "load_causal_lm",
    "load_plain_model",
    "read_directory",
    "write_tokenizer",
]

TASKS = {
    "text-generation": "a decoder-only LM (*ForCausalLM, *LMHeadModel): KV-cache program for the LLM runners",
    "fill-mask": "*ForMaskedLM: forward(input_ids, attention_mask) -> logits",
    "text-classification": "*ForSequenceClassification: forward(input_ids, attention_mask) -> logits",
    "feature-extraction": "an encoder-only *Model (BertModel, ...): forward(input_ids, attention_mask) -> "
    "last_hidden_state",
}
_SUFFIXES = (
    ("ForCausalLM", "text-generation"),
    ("LMHeadModel", "text-generation"),
    ("ForMaskedLM", "fill-mask"),
    ("ForSequenceClassification", "text-classification"),
)
_AUTO = {
    "text-generation": "AutoModelForCausalLM",
    "fill-mask": "AutoModelForMaskedLM",
    "text-classification": "AutoModelForSequenceClassification",
    "feature-extraction": "AutoModel",
}
_SUPPORTED = "*ForCausalLM/*LMHeadModel, *ForMaskedLM, *ForSequenceClassification, an encoder-only *Model"
DEFAULT_MAX_SEQ_LEN = 128  # cache positions of a text-generation export (capped by the model's own limit)
DEFAULT_PLAIN_SEQ_LEN = 32  # tokens per call of a plain (encoder) export


@dataclass(frozen=True)
class HFDirectory:
    """A model directory read: its path, its config (a transformers ``PretrainedConfig``), the task."""

    path: str
    config: object
    architecture: str
    task: str


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ExportError("a transformers model directory needs the 'transformers' package") from None
    return transformers


def _task_of(architecture: str, model_type: str) -> str | None:
    for suffix, task in _SUFFIXES:
        if architecture.endswith(suffix):
            return task
    if architecture.endswith("Model") and not architecture.endswith("PreTrainedModel"):
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as causal
        from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES as masked

        if model_type in masked and model_type not in causal:  # an encoder: BERT, RoBERTa, DistilBERT, ...
            return "feature-extraction"
    return None


def read_directory(path: str) -> HFDirectory:
    """The directory's config and task; a missing ``config.json`` or an unsupported architecture is an `ExportError`."""
    config_file = os.path.join(path, "config.json")
    if not os.path.isfile(config_file):
        raise ExportError(
            f"'{path}' has no config.json: a transformers model directory holds config.json, weights and "
            "tokenizer files (what save_pretrained writes)"
        )
    try:
        with open(config_file, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise ExportError(f"{config_file}: not a readable JSON file: {e}") from None
    if not isinstance(raw, dict):
        raise ExportError(f"{config_file}: expected a JSON object, found a {type(raw).__name__}")
    architectures = raw.get("architectures") or []
    model_type = str(raw.get("model_type", ""))
    if not architectures:
        raise ExportError(f"{config_file} names no architecture ('architectures' is missing or empty)")
    architecture = str(architectures[0])
    task = _task_of(architecture, model_type)
    if task is None:
        raise ExportError(
            f"{config_file}: architecture '{architecture}' (model_type '{model_type}') is not supported: "
            f"torchedge export takes {_SUPPORTED}"
        )
    tf = _transformers()
    try:
        config = tf.AutoConfig.from_pretrained(path, local_files_only=True)
    except Exception as e:  # an unknown model_type, a malformed field: transformers' one line
        raise ExportError(f"{config_file}: transformers cannot read it: {_first_line(e)}") from None
    return HFDirectory(path, config, architecture, task)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _load(directory: HFDirectory, dtype: str):
    auto = getattr(_transformers(), _AUTO[directory.task])
    try:
        model = auto.from_pretrained(directory.path, local_files_only=True, dtype=getattr(torch, dtype))
    except Exception as e:  # missing weights, a mismatched checkpoint
        raise ExportError(
            f"'{directory.path}': {_AUTO[directory.task]}.from_pretrained failed: {type(e).__name__}: {_first_line(e)}"
        ) from None
    _own_weights(model)
    return model.eval()


@torch.no_grad()
def _own_weights(model) -> None:
    """Give each weight memory of its own. ``from_pretrained`` leaves them in one memory map of the
    checkpoint, which stays resident while any of them lives: the weights that an export replaces
    (folded into transposed constants, quantized) could not be freed."""
    for tensor in [*model.parameters(), *model.buffers()]:
        tensor.data = tensor.data.clone()


def default_max_seq_len(config) -> int:
    """`DEFAULT_MAX_SEQ_LEN`, or the model's ``max_position_embeddings`` when that is smaller."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    limit = getattr(text_config, "max_position_embeddings", None)
    return min(DEFAULT_MAX_SEQ_LEN, int(limit)) if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_SEQ_LEN


def _check_seq_len(directory: HFDirectory, seq_len: int) -> None:
    limit = getattr(directory.config, "max_position_embeddings", None)
    if isinstance(limit, int) and seq_len > limit:
        raise ExportError(
            f"--max-seq-len {seq_len}: '{directory.path}' has max_position_embeddings {limit}; use at most {limit}"
        )


def load_causal_lm(directory: HFDirectory, dtype: str = "float32", max_seq_len: int | None = None):
    """The directory's ``AutoModelForCausalLM`` in ``dtype`` and the cache size to export it with."""
    if directory.task != "text-generation":
        raise ExportError(f"'{directory.path}' is a {directory.task} model ({directory.architecture}), not a causal LM")
    seq_len = max_seq_len or default_max_seq_len(directory.config)
    _check_seq_len(directory, seq_len)
    return _load(directory, dtype), seq_len


def load_plain_model(directory: HFDirectory, max_seq_len: int | None = None, dtype: str = "float32"):
    """``(module, (input_ids, attention_mask))``: one forward call over ``max_seq_len`` tokens
    (default `DEFAULT_PLAIN_SEQ_LEN`), returning the logits (``last_hidden_state`` for an encoder).

    A text-generation directory gives its full-sequence logits, without a cache.
    """
    seq_len = max_seq_len or min(DEFAULT_PLAIN_SEQ_LEN, default_max_seq_len(directory.config))
    _check_seq_len(directory, seq_len)
    model = _load(directory, dtype)
    output = "last_hidden_state" if directory.task == "feature-extraction" else "logits"
    vocab_size = int(getattr(directory.config.get_text_config(), "vocab_size", 2) or 2)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, vocab_size, (1, seq_len), generator=generator, dtype=torch.long)
    attention_mask = torch.ones((1, seq_len), dtype=torch.long)
    return _Forward(model, output), (input_ids, attention_mask)


class _Forward(torch.nn.Module):
    """``model(input_ids, attention_mask)`` returning one tensor: ExecuTorch programs return tensors."""

    def __init__(self, model, output: str):
        super().__init__()
        self.model = model
        self.output = output

    def forward(self, input_ids, attention_mask):
        return getattr(self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True), self.output)


def write_tokenizer(path: str, destination: str) -> str | None:
    """The directory's ``tokenizer.json`` copied to ``destination`` (or converted from another
    tokenizer format by ``AutoTokenizer``'s fast tokenizer); what was done, None if the directory has no tokenizer."""
    source = os.path.join(path, "tokenizer.json")
    if os.path.isfile(source):
        shutil.copyfile(source, destination)
        return "copied"
    tf = _transformers()
    try:
        tokenizer = tf.AutoTokenizer.from_pretrained(path, local_files_only=True, use_fast=True)
    except Exception:  # no tokenizer files at all, or none transformers reads
        return None
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    backend.save(destination)
    return "converted"
