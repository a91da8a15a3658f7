"""`TextGenerator`: prefill a prompt, then decode one token per call into a program's KV cache.

The program follows the convention of `transformers`' ``TorchExportableModuleForDecoderOnlyLM``:
``forward(input_ids int64 [1, T], cache_position int64 [T]) -> [logits float [1, T, V]]``, the KV
cache living inside the program between calls. ``T`` is dynamic (any size up to the bound in the
method's metadata) or fixed. A method ``decode`` taking exactly one token, when the program has one
(exported beside ``forward`` with the cache shared, see `torchedge.models.causal_lm`), runs the
decode steps. Constant methods, read when present: ``get_max_context_len`` or
``get_max_seq_len`` (cache capacity), ``get_vocab_size``, ``get_bos_id``, ``get_eos_ids`` or ``get_eos_id``.
"""

from __future__ import annotations

import numbers
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from torchedge.errors import InputError
from torchedge.generation.sampling import Sampler

__all__ = ["GenerationResult", "TextGenerator"]

StopReason = Literal["stop_token", "max_new_tokens", "max_seq_len"]


@dataclass(frozen=True)
class GenerationResult:
    """New tokens (a stop token included), the prompt length, and where the time went.

    ``stopped_by``: ``"stop_token"``, ``"max_new_tokens"``, or ``"max_seq_len"`` when prompt
    plus new tokens filled the program's cache (a clean stop, not an error).
    """

    tokens: list[int]
    prompt_tokens: int
    prefill_seconds: float  # prompt calls and the choice of the first new token
    decode_seconds: float  # the one-token calls that produced the other new tokens
    stopped_by: StopReason

    @property
    def prefill_tokens_per_second(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        steps = len(self.tokens) - 1
        return steps / self.decode_seconds if self.decode_seconds > 0 else 0.0


class TextGenerator:
    """Generates tokens with a loaded program.

    ``program`` is a torchedge `Program`, or any object with ``method_names``,
    ``metadata(name).inputs`` (each with ``.shape``, ``.dtype``, ``.dynamic``) and
    ``load_method(name)`` returning something with ``.execute(list) -> list``.
    """

    def __init__(self, program, method: str = "forward", decode_method: str = "decode"):
        self.method_name = method
        names = set(program.method_names)
        if method not in names:
            raise InputError(f"the program has no method '{method}'; methods: {', '.join(sorted(names))}")
        self._ids_meta, self._positions_meta = self._signature(program.metadata(method))
        self._forward = program.load_method(method)
        # A one-token method sharing the cache (static shapes: faster, fully delegable) decodes, when present.
        self._decode = self._forward
        if decode_method in names and decode_method != method:
            ids, _ = self._signature(program.metadata(decode_method), decode_method)
            if tuple(ids.shape) != (1, 1) or ids.dynamic:
                raise InputError(f"method '{decode_method}' must take exactly one token, it takes {list(ids.shape)}")
            self._decode = program.load_method(decode_method)
        self.tokens_per_call = int(self._ids_meta.shape[1])  # the bound when dynamic
        self.dynamic = bool(self._ids_meta.dynamic)
        capacity = _constant(program, names, "get_max_context_len", "get_max_seq_len")
        vocab = _constant(program, names, "get_vocab_size")
        bos = _constant(program, names, "get_bos_id")
        self.max_seq_len = None if capacity is None else int(capacity[0])
        self.vocab_size = None if vocab is None else int(vocab[0])
        self.bos_id = None if bos is None else int(bos[0])
        self.eos_ids = tuple(int(i) for i in _constant(program, names, "get_eos_ids", "get_eos_id") or ())

    def _signature(self, meta, name: str | None = None):
        where = f"method '{name or self.method_name}'"
        inputs = tuple(meta.inputs)
        if len(inputs) != 2 or not all(hasattr(m, "shape") for m in inputs):
            raise InputError(
                f"{where} must take two tensors (input_ids [1, T], cache_position [T]), it takes {len(inputs)} input(s)"
            )
        ids, positions = inputs
        if len(ids.shape) != 2 or ids.shape[0] != 1 or len(positions.shape) != 1:
            raise InputError(
                f"{where}: expected input_ids [1, T] and cache_position [T], "
                f"got {list(ids.shape)} and {list(positions.shape)}"
            )
        for name, m in (("input_ids", ids), ("cache_position", positions)):
            if np.dtype(m.dtype).kind not in "iu":
                raise InputError(f"{where}: {name} must be an integer tensor, it is {np.dtype(m.dtype)}")
        return ids, positions

    def generate(
        self,
        prompt_ids,
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        stop_tokens=(),
        prefill_chunk: int | None = None,
        callback: Callable[[int], object] | None = None,
    ) -> GenerationResult:
        """Prefill ``prompt_ids`` (in one call, or chunks of ``prefill_chunk``), then decode.

        Decoding stops at a token in ``stop_tokens`` (kept in the result), after
        ``max_new_tokens``, or when prompt plus new tokens reach the cache capacity.
        ``callback(token_id)`` sees every new token as soon as it is chosen.
        """
        sampler = Sampler(temperature, top_k, top_p, seed)
        prompt = self._check_prompt(prompt_ids)
        max_new_tokens = _check_count(max_new_tokens)
        chunk = self._check_chunking(len(prompt), max_new_tokens, prefill_chunk)
        stop = {_check_token(t, "stop token") for t in stop_tokens}
        notify = callback or (lambda token: None)

        start = time.perf_counter()
        for begin in range(0, len(prompt), chunk):
            logits = self._call(prompt[begin : begin + chunk], begin)
        token = sampler(logits)
        prefill_seconds, decode_seconds = time.perf_counter() - start, 0.0
        tokens = []
        while True:
            tokens.append(token)
            notify(token)
            reason = self._stop_reason(token, stop, len(tokens), max_new_tokens, len(prompt) + len(tokens))
            if reason is not None:
                return GenerationResult(tokens, len(prompt), prefill_seconds, decode_seconds, reason)
            start = time.perf_counter()
            token = sampler(self._call([token], len(prompt) + len(tokens) - 1, self._decode))
            decode_seconds += time.perf_counter() - start

    def _stop_reason(self, token: int, stop: set, count: int, max_new_tokens: int, length: int) -> StopReason | None:
        if token in stop:
            return "stop_token"
        if count == max_new_tokens:
            return "max_new_tokens"
        if length == self.max_seq_len:
            return "max_seq_len"
        return None

    def _call(self, ids: list[int], position: int, method=None) -> np.ndarray:
        """Run one call on ``ids`` at cache positions ``position...``; the last position's logits."""
        inputs = [
            np.asarray([ids], dtype=self._ids_meta.dtype),
            np.arange(position, position + len(ids), dtype=self._positions_meta.dtype),
        ]
        logits = (method or self._forward).execute(inputs)[0]
        if np.ndim(logits) != 3 or logits.shape[:2] != (1, len(ids)):
            raise InputError(
                f"method '{self.method_name}' must return logits [1, {len(ids)}, vocab], "
                f"it returned {list(np.shape(logits))}"
            )
        return logits[0, -1]

    def _check_prompt(self, prompt_ids) -> list[int]:
        prompt = [_check_token(t, "prompt token") for t in prompt_ids]
        if not prompt:
            raise InputError("the prompt is empty: give at least one token (for example the bos id)")
        if self.vocab_size is not None and max(prompt) >= self.vocab_size:
            raise InputError(f"prompt token {max(prompt)} is outside the vocabulary of {self.vocab_size} tokens")
        if self.max_seq_len is not None and len(prompt) >= self.max_seq_len:
            raise InputError(
                f"the prompt has {len(prompt)} tokens but the program's cache holds {self.max_seq_len} "
                f"positions: at most {self.max_seq_len - 1} prompt tokens leave room to generate"
            )
        return prompt

    def _check_chunking(self, prompt_length: int, max_new_tokens: int, prefill_chunk: int | None) -> int:
        """The number of prompt tokens per prefill call."""
        bound, where = self.tokens_per_call, f"method '{self.method_name}'"
        if self.dynamic:
            if prefill_chunk is None:
                return bound
            if (
                isinstance(prefill_chunk, bool)
                or not isinstance(prefill_chunk, numbers.Integral)
                or not 1 <= prefill_chunk <= bound
            ):
                raise InputError(
                    f"prefill_chunk must be an integer in [1, {bound}] ({where} takes at most "
                    f"{bound} tokens per call), got {prefill_chunk!r}"
                )
            return int(prefill_chunk)
        if prefill_chunk not in (None, bound):
            raise InputError(
                f"{where} takes exactly {bound} token(s) per call: prefill_chunk must be None "
                f"or {bound}, got {prefill_chunk!r}"
            )
        if bound > 1 and prompt_length % bound:
            raise InputError(
                f"{where} takes exactly {bound} tokens per call and the prompt has {prompt_length}: "
                f"give a multiple of {bound} (prompts are not padded)"
            )
        if bound > 1 and max_new_tokens > 1:
            raise InputError(
                f"{where} takes exactly {bound} tokens per call, so it cannot decode one token at a "
                "time: export it with a dynamic sequence length (or T=1), or ask for 1 new token"
            )
        return bound


def _constant(program, names: set, *candidates: str) -> list | None:
    """The values returned by the first of ``candidates`` the program has, or None."""
    name = next((n for n in candidates if n in names), None)
    return None if name is None else list(program.load_method(name).execute([]))


def _check_token(value, what: str) -> int:
    try:
        token = operator.index(value)
    except TypeError:
        raise InputError(f"{what} must be an integer id, got {value!r}") from None
    if isinstance(value, bool) or token < 0:
        raise InputError(f"{what} must be an integer id >= 0, got {value!r}")
    return token


def _check_count(value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"max_new_tokens must be an integer >= 1, got {value!r}")
    return int(value)
