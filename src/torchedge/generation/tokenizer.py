"""Text <-> token ids through the `tokenizers` package (imported lazily: only when a tokenizer is used)."""

from __future__ import annotations

import json
import os

from torchedge.errors import InputError, TorchEdgeError

__all__ = ["Tokenizer", "TextStream", "train_bpe_tokenizer"]

# Special tokens that mark the start and end of a sequence in common tokenizer.json files.
_BOS_NAMES = ("<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>")
_EOS_NAMES = ("</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>", "<|im_end|>")


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise TorchEdgeError(
            "text generation needs the 'tokenizers' package, which is not installed: "
            "pip install 'torchedge[generation]'"
        ) from None
    return tokenizers


class Tokenizer:
    """A `tokenizers.Tokenizer` with the ids of its beginning- and end-of-sequence tokens.

    ``bos_token``/``eos_token`` name those tokens; when not given they are read from a
    ``tokenizer_config.json`` beside the file, or recognised among the special tokens.
    """

    def __init__(self, backend, bos_token: str | None = None, eos_token: str | None = None):
        self._backend = backend
        self.bos_id = self._special_id(bos_token, _BOS_NAMES, "bos")
        self.eos_id = self._special_id(eos_token, _EOS_NAMES, "eos")

    @classmethod
    def from_file(
        cls, path: str | os.PathLike, bos_token: str | None = None, eos_token: str | None = None
    ) -> Tokenizer:
        """Load a ``tokenizer.json``."""
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no tokenizer file '{path}'")
        tokenizers = _tokenizers()  # a missing package is not a bad file
        try:
            backend = tokenizers.Tokenizer.from_file(path)
        except Exception as e:  # tokenizers reports parse errors as plain Exceptions
            raise InputError(f"'{path}' is not a tokenizer.json the 'tokenizers' package can read: {e}") from None
        config = _sibling_config(path)
        return cls(backend, bos_token or config.get("bos_token"), eos_token or config.get("eos_token"))

    @property
    def vocab_size(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; with ``add_special_tokens`` the tokenizer's template adds e.g. a bos token."""
        if not isinstance(text, str):
            raise InputError(f"encode takes a str, got {type(text).__name__}")
        return list(self._backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self._backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def stream(self, skip_special_tokens: bool = True) -> TextStream:
        """An incremental decoder for tokens that arrive one at a time."""
        return TextStream(self._backend, skip_special_tokens)

    def save(self, path: str | os.PathLike) -> None:
        self._backend.save(os.fspath(path))

    def _special_id(self, name: str | None, known: tuple[str, ...], what: str) -> int | None:
        if name is not None:
            token_id = self._backend.token_to_id(name)
            if token_id is None:
                raise InputError(f"{what} token '{name}' is not in the tokenizer's vocabulary")
            return token_id
        specials = {t.content for t in self._backend.get_added_tokens_decoder().values() if t.special}
        return next((self._backend.token_to_id(n) for n in known if n in specials), None)


class TextStream:
    """Turns tokens into text as they arrive, holding back bytes of a character not yet complete.

    Bytes that never complete a character (a sequence ending mid-character) are never printed.
    """

    def __init__(self, backend, skip_special_tokens: bool = True):
        self._backend = backend
        self._decoder = _tokenizers().decoders.DecodeStream(skip_special_tokens=skip_special_tokens)

    def push(self, token_id: int) -> str:
        """The text this token completes ('' while it only starts a multi-byte character)."""
        return self._decoder.step(self._backend, int(token_id)) or ""


def _sibling_config(path: str) -> dict:
    """bos/eos token names from the ``tokenizer_config.json`` next to ``path``, when there is one."""
    config_path = os.path.join(os.path.dirname(path), "tokenizer_config.json")
    if not os.path.isfile(config_path):
        return {}
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    names = {}
    for key in ("bos_token", "eos_token"):
        value = config.get(key)
        names[key] = value.get("content") if isinstance(value, dict) else value
    return names


def train_bpe_tokenizer(
    texts, vocab_size: int = 512, special_tokens: tuple[str, ...] = ("<pad>", "<s>", "</s>")
) -> Tokenizer:
    """Train a byte-level BPE tokenizer on ``texts`` (nothing is downloaded).

    Special tokens take the first ids, in order; when ``<s>`` is among them, encoding
    prepends it. Every byte has a token, so any text encodes.
    """
    tk = _tokenizers()
    texts = list(texts)
    minimum = 256 + len(special_tokens)
    if not isinstance(vocab_size, int) or vocab_size < minimum:
        raise InputError(
            f"vocab_size must be at least {minimum} (256 bytes + {len(special_tokens)} special "
            f"tokens), got {vocab_size!r}"
        )
    if not texts or not all(isinstance(t, str) for t in texts):
        raise InputError("train_bpe_tokenizer needs a non-empty list of strings")
    backend = tk.Tokenizer(tk.models.BPE())
    backend.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer)
    if "<s>" in special_tokens:
        backend.post_processor = tk.processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", backend.token_to_id("<s>"))]
        )
    return Tokenizer(backend)
