"""`Stats`: the timings and token counts of one generation, with the fields of ExecuTorch's LLM runner.

The fields, their units (whole milliseconds of the wall clock) and the JSON of `to_json_string`
are those of ExecuTorch's ``extension/llm/runner/stats.h``, so tools that read ExecuTorch's
``PyTorchObserver {...}`` lines read torchedge's. As there, ``num_generated_tokens`` counts the
tokens of the one-token decode calls: the first new token comes from the prompt's prefill.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import ClassVar

__all__ = ["Stats", "now_ms"]


def now_ms() -> int:
    """Milliseconds since the epoch, truncated, as ExecuTorch's ``time_in_ms``."""
    return time.time_ns() // 1_000_000


@dataclass
class Stats:
    """Timestamps (ms) of a generation's stages, time totals (ms) and token counts."""

    SCALING_FACTOR_UNITS_PER_SECOND: ClassVar[int] = 1000

    model_load_start_ms: int = 0
    model_load_end_ms: int = 0
    inference_start_ms: int = 0  # before the prompt is encoded
    token_encode_end_ms: int = 0
    model_execution_start_ms: int = 0  # of the latest model call
    model_execution_end_ms: int = 0
    prompt_eval_end_ms: int = 0  # the prompt is in the cache and the first new token chosen
    first_token_ms: int = 0
    inference_end_ms: int = 0
    aggregate_sampling_time_ms: int = 0
    aggregate_model_execution_time_ms: int = 0
    num_prompt_tokens: int = 0
    num_generated_tokens: int = 0

    def reset(self, all_stats: bool = False) -> None:
        """Zero the fields of a generation; the load times too with ``all_stats``."""
        kept = () if all_stats else ("model_load_start_ms", "model_load_end_ms")
        for field in fields(self):
            if field.name not in kept:
                setattr(self, field.name, field.default)

    @property
    def prefill_tokens_per_second(self) -> float | None:
        """Prompt tokens over encode plus prefill time; None when that took under a millisecond."""
        return _rate(self.num_prompt_tokens, self.prompt_eval_end_ms - self.inference_start_ms)

    @property
    def decode_tokens_per_second(self) -> float | None:
        """Decoded tokens over the decode time; None when that took under a millisecond."""
        return _rate(self.num_generated_tokens, self.inference_end_ms - self.prompt_eval_end_ms)

    def to_json_string(self) -> str:
        """One line of JSON: ExecuTorch's keys, in its order, its number formats."""
        fields: list[tuple[str, object]] = []
        for key, rate in (
            ("prefill_token_per_sec", self.prefill_tokens_per_second),
            ("decode_token_per_sec", self.decode_tokens_per_second),
        ):
            if rate is not None:
                fields.append((key, _cpp_double(rate)))
        fields += [
            ("prompt_tokens", self.num_prompt_tokens),
            ("generated_tokens", self.num_generated_tokens),
            *(
                (key, getattr(self, key))
                for key in (
                    "model_load_start_ms",
                    "model_load_end_ms",
                    "inference_start_ms",
                    "inference_end_ms",
                    "model_execution_start_ms",
                    "model_execution_end_ms",
                    "prompt_eval_end_ms",
                    "first_token_ms",
                    "aggregate_sampling_time_ms",
                    "aggregate_model_execution_time_ms",
                )
            ),
            ("SCALING_FACTOR_UNITS_PER_SECOND", self.SCALING_FACTOR_UNITS_PER_SECOND),
        ]
        return "{" + ",".join(f'"{key}":{value}' for key, value in fields) + "}"

    def report(self) -> str:
        """ExecuTorch's ``print_report``: the ``PyTorchObserver`` JSON line, then the readable lines."""
        scale = self.SCALING_FACTOR_UNITS_PER_SECOND
        total = self.inference_end_ms - self.inference_start_ms
        prompt = self.prompt_eval_end_ms - self.inference_start_ms
        decode = self.inference_end_ms - self.prompt_eval_end_ms
        first = self.first_token_ms - self.inference_start_ms
        return "\n".join(
            [
                f"PyTorchObserver {self.to_json_string()}",
                f"\tPrompt Tokens: {self.num_prompt_tokens}    Generated Tokens: {self.num_generated_tokens}",
                f"\tModel Load Time:\t\t{(self.model_load_end_ms - self.model_load_start_ms) / scale:f} (seconds)",
                f"\tTotal inference time:\t\t{total / scale:f} (seconds)\t\t Rate: \t"
                f"{_rate(self.num_generated_tokens, total) or 0.0:f} (tokens/second)",
                f"\t\tPrompt evaluation:\t{prompt / scale:f} (seconds)\t\t Rate: \t"
                f"{_rate(self.num_prompt_tokens, prompt) or 0.0:f} (tokens/second)",
                f"\t\tGenerated {self.num_generated_tokens} tokens:\t{decode / scale:f} (seconds)\t\t Rate: \t"
                f"{_rate(self.num_generated_tokens, decode) or 0.0:f} (tokens/second)",
                f"\tTime to first generated token:\t{first / scale:f} (seconds)",
                f"\tSampling time over {self.num_prompt_tokens + self.num_generated_tokens} tokens:\t"
                f"{self.aggregate_sampling_time_ms / scale:f} (seconds)",
            ]
        )


def _rate(tokens: int, milliseconds: int) -> float | None:
    return tokens / milliseconds * Stats.SCALING_FACTOR_UNITS_PER_SECOND if milliseconds > 0 else None


def _cpp_double(value: float) -> str:
    """A double as C++'s ``operator<<`` writes it by default (6 significant digits, ``%g``)."""
    return f"{value:g}"
