"""`Conversation`: a multi-turn chat that keeps its history in the program's KV cache.

Each turn renders the whole conversation with the chat template, encodes it, and feeds the model
only the tokens after the longest prefix already in the cache: the history is never re-read. Where
the rendered history differs from what the cache holds (a reply re-encodes to other tokens, a stop
string cut a reply short, the template rewrites earlier turns), the cache is rewound to the
last position that agrees and refilled from there; positions past the fill point are masked by
position, as in ExecuTorch's runner, whose ``pos_`` likewise carries over between calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torchedge.errors import InputError
from torchedge.generation.chat import ChatTemplate
from torchedge.generation.runner import GenerationResult, TextGenerator
from torchedge.generation.stats import Stats, now_ms

__all__ = ["Conversation"]


class Conversation:
    """Chat turns with one program: `say` adds a user message and returns the reply's result.

    ``messages`` is the history (``{"role", "content"}`` dicts, a ``system`` message first when
    given); ``cached`` the tokens whose keys and values are in the cache, in position order.
    """

    def __init__(
        self,
        generator: TextGenerator,
        tokenizer,
        template: ChatTemplate | None = None,
        system: str | None = None,
        stop_tokens: Sequence[int] | None = None,
    ):
        self.generator = generator
        self.tokenizer = tokenizer
        self.template = template or ChatTemplate()
        self.messages: list[dict] = [] if system is None else [{"role": "system", "content": system}]
        self.cached: list[int] = []
        if stop_tokens is None:  # the program's end-of-sequence ids, else the tokenizer's
            stop_tokens = generator.eos_ids or [i for i in (tokenizer.eos_id,) if i is not None]
        self.stop_tokens = tuple(stop_tokens)

    def say(
        self,
        text: str,
        max_new_tokens: int,
        *,
        stats: Stats | None = None,
        on_text: Callable[[str], object] | None = None,
        **options,
    ) -> GenerationResult:
        """Add the user's ``text``, generate the reply and add it; ``options`` go to `TextGenerator.generate`.

        ``stats`` (ExecuTorch's fields) counts the tokens this turn fed as prompt tokens.
        """
        if not isinstance(text, str):
            raise InputError(f"a chat message is a str, got {type(text).__name__}")
        stats = Stats() if stats is None else stats
        stats.inference_start_ms = now_ms()
        messages = [*self.messages, {"role": "user", "content": text}]
        tokens = self.tokenizer.encode(self.template.render(messages), add_special_tokens=False)
        stats.token_encode_end_ms = now_ms()
        reused = self._reusable(tokens)
        result = self.generator.generate(
            tokens[reused:],
            max_new_tokens,
            start_position=reused,
            stop_tokens=self.stop_tokens,
            tokenizer=self.tokenizer,
            on_text=on_text,
            stats=stats,
            **options,
        )
        # the last new token was chosen but not fed: it is not in the cache
        self.cached = tokens + result.tokens[:-1]
        self.messages = [*messages, {"role": "assistant", "content": result.text}]
        return result

    def reset(self) -> None:
        """Forget the turns (a system message stays); the next turn refills the cache from position 0."""
        self.messages = [m for m in self.messages[:1] if m["role"] == "system"]
        self.cached = []

    def _reusable(self, tokens: list[int]) -> int:
        """How many leading ``tokens`` the cache holds already (at least one token is left to feed)."""
        common = 0
        for held, wanted in zip(self.cached, tokens):
            if held != wanted:
                break
            common += 1
        return min(common, len(tokens) - 1)
