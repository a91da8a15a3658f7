"""`TextGenerator`: prefill a prompt, then decode one token per call into a program's KV cache.

Two layouts are read, as ExecuTorch's LLM runner reads them: ``forward(input_ids int64 [1, T],
cache_position int64 [T])`` (`transformers`' ``TorchExportableModuleForDecoderOnlyLM``,
optimum-executorch) and ``forward(tokens int64 [1, T], input_pos int64 [1])`` (ExecuTorch's
``export_llama``: the start position only). The logits are ``[1, T, V]`` or the last position's
``[1, V]``; the KV cache lives inside the program between calls. ``T`` is dynamic (any size up to
the bound in the method's metadata) or fixed. A method ``decode`` taking exactly one token, when the
program has one (exported beside ``forward`` with the cache shared, see `torchedge.models.causal_lm`),
runs the decode steps. Constant methods, read when present: ``get_max_context_len`` or
``get_max_seq_len`` (cache capacity), ``get_vocab_size``, ``get_bos_id``, ``get_eos_ids`` or ``get_eos_id``.
A generation may continue a cache filled by earlier ones (``start_position``): see
`torchedge.generation.conversation`.
"""

from __future__ import annotations

import numbers
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from torchedge.errors import InputError
from torchedge.generation.sampling import Sampler
from torchedge.generation.stats import Stats, now_ms
from torchedge.generation.stops import StopText

__all__ = ["GenerationResult", "TextGenerator"]

StopReason = Literal["stop_token", "stop_string", "max_new_tokens", "max_seq_len"]


@dataclass(frozen=True)
class GenerationResult:
    """New tokens (a stop token, or the token completing a stop string, included), the prompt
    length, and where the time went.

    ``stopped_by``: ``"stop_token"``, ``"stop_string"``, ``"max_new_tokens"``, or ``"max_seq_len"``
    when the cache is full (a clean stop, not an error). ``text``: the new tokens' text, cut before
    a stop string, when the generation had a tokenizer, else None. ``stats``: ExecuTorch's fields.
    """

    tokens: list[int]
    prompt_tokens: int
    prefill_seconds: float  # prompt calls and the choice of the first new token
    decode_seconds: float  # the one-token calls that produced the other new tokens
    stopped_by: StopReason
    text: str | None = None
    stats: Stats = field(default_factory=Stats)

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
        # ExecuTorch's rule: a position input of one element takes the start position only
        self._start_only = tuple(self._positions_meta.shape) == (1,)
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
                f"{where} must take two tensors (input_ids [1, T] and cache_position [T] or input_pos [1]), "
                f"it takes {len(inputs)} input(s)"
            )
        ids, positions = inputs
        if len(ids.shape) != 2 or ids.shape[0] != 1 or len(positions.shape) != 1:
            raise InputError(
                f"{where}: expected input_ids [1, T] and cache_position [T] or input_pos [1], "
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
        start_position: int = 0,
        tokenizer=None,
        stop_strings: Sequence[str] = (),
        on_text: Callable[[str], object] | None = None,
        stats: Stats | None = None,
    ) -> GenerationResult:
        """Prefill ``prompt_ids`` (in one call, or chunks of ``prefill_chunk``), then decode.

        The prompt goes to the cache positions from ``start_position`` on (0: a new sequence;
        more: after the tokens of earlier calls, which stay in the cache). Decoding stops at a
        token in ``stop_tokens`` (kept in the result), when the text contains one of
        ``stop_strings`` (they need ``tokenizer``), after ``max_new_tokens``, or when the cache is
        full. ``callback(token_id)`` sees every new token as soon as it is chosen; with a
        ``tokenizer``, ``on_text(text)`` sees the text as soon as no stop string can begin in it.
        ``stats`` (ExecuTorch's fields) is filled in; ``inference_start_ms`` and
        ``token_encode_end_ms`` are kept when set (the caller encoded the prompt).
        """
        sampler = Sampler(temperature, top_k, top_p, seed)
        start_position = _check_position(start_position)
        prompt = self._check_prompt(prompt_ids, start_position)
        max_new_tokens = _check_count(max_new_tokens)
        chunk = self._check_chunking(len(prompt), max_new_tokens, prefill_chunk)
        stop = {_check_token(t, "stop token") for t in stop_tokens}
        text = _TextOut(tokenizer, stop_strings, on_text)
        notify = callback or (lambda token: None)
        stats = Stats() if stats is None else stats
        stats.inference_start_ms = stats.inference_start_ms or now_ms()
        stats.token_encode_end_ms = stats.token_encode_end_ms or stats.inference_start_ms
        stats.num_prompt_tokens = len(prompt)

        start = time.perf_counter()
        for begin in range(0, len(prompt), chunk):
            logits = self._call(prompt[begin : begin + chunk], start_position + begin, stats)
        token = _sample(sampler, logits, stats)
        stats.prompt_eval_end_ms = stats.first_token_ms = now_ms()
        prefill_seconds, decode_seconds = time.perf_counter() - start, 0.0
        tokens: list[int] = []
        while True:
            tokens.append(token)
            notify(token)
            text.push(token)
            length = start_position + len(prompt) + len(tokens)
            reason = self._stop_reason(token, stop, text.stopped, len(tokens), max_new_tokens, length)
            if reason is not None:
                break
            start = time.perf_counter()
            logits = self._call([token], length - 1, stats, self._decode)
            token = _sample(sampler, logits, stats)
            decode_seconds += time.perf_counter() - start
        stats.inference_end_ms = now_ms()
        stats.num_generated_tokens = len(tokens) - 1  # as ExecuTorch counts: the decode calls' tokens
        return GenerationResult(tokens, len(prompt), prefill_seconds, decode_seconds, reason, text.finish(), stats)

    def _stop_reason(
        self, token: int, stop: set, stop_string: bool, count: int, max_new_tokens: int, length: int
    ) -> StopReason | None:
        if token in stop:
            return "stop_token"
        if stop_string:
            return "stop_string"
        if count == max_new_tokens:
            return "max_new_tokens"
        if length == self.max_seq_len:
            return "max_seq_len"
        return None

    def _call(self, ids: list[int], position: int, stats: Stats, method=None) -> np.ndarray:
        """Run one call on ``ids`` at cache positions ``position...``; the last position's logits."""
        positions = [position] if self._start_only else range(position, position + len(ids))
        inputs = [
            np.asarray([ids], dtype=self._ids_meta.dtype),
            np.asarray(positions, dtype=self._positions_meta.dtype),
        ]
        stats.model_execution_start_ms = now_ms()
        logits = (method or self._forward).execute(inputs)[0]
        stats.model_execution_end_ms = now_ms()
        stats.aggregate_model_execution_time_ms += stats.model_execution_end_ms - stats.model_execution_start_ms
        shape = tuple(np.shape(logits))
        if shape[:2] == (1, len(ids)) and len(shape) == 3:
            return logits[0, -1]
        if len(shape) == 2 and shape[0] == 1:
            return logits[0]
        raise InputError(
            f"method '{self.method_name}' must return logits [1, {len(ids)}, vocab] or the last position's "
            f"[1, vocab], it returned {list(shape)}"
        )

    def _check_prompt(self, prompt_ids, start_position: int = 0) -> list[int]:
        prompt = [_check_token(t, "prompt token") for t in prompt_ids]
        if not prompt:
            raise InputError("the prompt is empty: give at least one token (for example the bos id)")
        if self.vocab_size is not None and max(prompt) >= self.vocab_size:
            raise InputError(f"prompt token {max(prompt)} is outside the vocabulary of {self.vocab_size} tokens")
        if self.max_seq_len is not None and start_position + len(prompt) >= self.max_seq_len:
            after = f" after the {start_position} already in the cache" if start_position else ""
            raise InputError(
                f"the prompt has {len(prompt)} tokens{after} but the program's cache holds {self.max_seq_len} "
                f"positions: at most {self.max_seq_len - 1 - start_position} prompt tokens leave room to generate"
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


def _check_position(value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InputError(f"start_position must be an integer >= 0, got {value!r}")
    return int(value)


def _sample(sampler: Sampler, logits: np.ndarray, stats: Stats) -> int:
    begin = now_ms()
    token = sampler(logits)
    stats.aggregate_sampling_time_ms += now_ms() - begin
    return token


class _TextOut:
    """The text of the new tokens, when there is a tokenizer: streamed to ``on_text``, cut at stop strings."""

    def __init__(self, tokenizer, stop_strings: Sequence[str], on_text: Callable[[str], object] | None):
        if tokenizer is None and (stop_strings or on_text is not None):
            raise InputError("stop strings and on_text need the tokenizer: pass tokenizer=")
        self._stream = None if tokenizer is None else tokenizer.stream()
        self._text = StopText(stop_strings)
        self._emit = on_text or (lambda text: None)

    @property
    def stopped(self) -> bool:
        return self._text.stopped

    def push(self, token: int) -> None:
        if self._stream is not None:
            self._send(self._text.push(self._stream.push(token)))

    def finish(self) -> str | None:
        if self._stream is None:
            return None
        self._send(self._text.flush())
        return self._text.text

    def _send(self, piece: str) -> None:
        if piece:
            self._emit(piece)
