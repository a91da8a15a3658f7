"""OpenAI's request and response shapes: requests checked field by field, errors as OpenAI writes them.

Every bad request is an `APIError`: an HTTP status (4xx) and ``{"error": {"message", "type",
"param", "code"}}``, ``param`` naming the field at fault. No web framework is imported here.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass

from torchedge.generation.serving.engine import Completion, GenerationParams

__all__ = [
    "APIError",
    "ChatRequest",
    "CompletionRequest",
    "chat_chunk",
    "chat_response",
    "completion_chunk",
    "completion_response",
    "parse_chat",
    "parse_completion",
    "parse_json",
]

MAX_STOP_STRINGS = 4  # as OpenAI
# Fields this server does not implement -> the values that mean "not used", which it accepts.
_UNSUPPORTED = {
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "best_of": (None, 1),
    "suffix": (None, ""),
    "tools": (None, []),
    "logit_bias": (None, {}),
    "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0),
}


class APIError(Exception):
    """A request the server refuses: ``status`` and OpenAI's error object."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        type: str = "invalid_request_error",
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad(message: str, param: str | None, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param, code)


def parse_json(body: bytes) -> dict:
    """The request body as a JSON object (400 naming the line and column where it is not JSON)."""
    if not body.strip():
        raise bad("the request body is empty: send a JSON object", None, "invalid_json")
    try:
        value = json.loads(body)
    except UnicodeDecodeError:
        raise bad("the request body is not UTF-8 text", None, "invalid_json") from None
    except json.JSONDecodeError as e:
        raise bad(
            f"the request body is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", None, "invalid_json"
        ) from None
    if not isinstance(value, dict):
        raise bad(f"the request body must be a JSON object, got a JSON {_json_kind(value)}", None, "invalid_json")
    return value


def _json_kind(value) -> str:
    kinds = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class CompletionRequest:
    model: str | None
    prompt: str | list[int]
    params: GenerationParams
    stream: bool
    include_usage: bool


@dataclass(frozen=True)
class ChatRequest:
    model: str | None
    messages: list[dict]
    params: GenerationParams
    stream: bool
    include_usage: bool


def _model(body: dict) -> str | None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad(f"'model' must be a string, got a JSON {_json_kind(model)}", "model")
    return model


def _params(body: dict, default_max_tokens: int | None, max_tokens_field: str = "max_tokens") -> GenerationParams:
    max_tokens = body.get(max_tokens_field)
    if max_tokens is None:
        max_tokens = default_max_tokens
    elif not _is_int(max_tokens) or max_tokens < 1:
        raise bad(f"'{max_tokens_field}' must be an integer >= 1, got {json.dumps(max_tokens)}", max_tokens_field)
    temperature = body.get("temperature")
    if temperature is None:
        temperature = 1.0
    elif not _is_number(temperature) or not 0 <= temperature <= 2:
        raise bad(f"'temperature' must be a number in [0, 2] (0: greedy), got {json.dumps(temperature)}", "temperature")
    top_p = body.get("top_p")
    if top_p is not None and (not _is_number(top_p) or not 0 < top_p <= 1):
        raise bad(f"'top_p' must be a number in (0, 1], got {json.dumps(top_p)}", "top_p")
    top_k = body.get("top_k")
    if top_k is not None and (not _is_int(top_k) or top_k < -1):
        raise bad(f"'top_k' must be an integer >= 1 (0 or -1: no limit), got {json.dumps(top_k)}", "top_k")
    seed = body.get("seed")
    if seed is not None and (not _is_int(seed) or seed < 0):
        raise bad(f"'seed' must be an integer >= 0, got {json.dumps(seed)}", "seed")
    n = body.get("n")
    if n is not None and n != 1:
        raise bad(f"'n' must be 1: this server returns one choice per request, got {json.dumps(n)}", "n")
    for name, neutral in _UNSUPPORTED.items():
        if name in body and body[name] not in neutral:
            raise bad(
                f"'{name}' is not supported by this server (only {' or '.join(json.dumps(v) for v in neutral)})",
                name,
                "unsupported_parameter",
            )
    return GenerationParams(
        max_tokens=max_tokens,
        temperature=float(temperature),
        top_p=None if top_p is None else float(top_p),
        top_k=None if top_k is None or top_k <= 0 else int(top_k),
        seed=seed,
        stop=_stop(body.get("stop")),
    )


def _stop(value) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise bad("'stop' must be a string or a list of strings", "stop")
    if len(stops) > MAX_STOP_STRINGS:
        raise bad(f"'stop' holds at most {MAX_STOP_STRINGS} strings, got {len(stops)}", "stop")
    if any(not s for s in stops):
        raise bad("'stop' strings must not be empty", "stop")
    return tuple(stops)


def _stream(body: dict) -> tuple[bool, bool]:
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad(f"'stream' must be true or false, got {json.dumps(stream)}", "stream")
    options = body.get("stream_options")
    if options is None:
        return bool(stream), False
    if not isinstance(options, dict):
        raise bad("'stream_options' must be an object such as {\"include_usage\": true}", "stream_options")
    if not stream:
        raise bad("'stream_options' is only allowed with 'stream': true", "stream_options")
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise bad("'stream_options.include_usage' must be true or false", "stream_options.include_usage")
    return True, include


def parse_completion(body: dict, default_max_tokens: int = 16) -> CompletionRequest:
    """``/v1/completions``: ``prompt`` is a string, a list of one string, or a list of token ids."""
    if "prompt" not in body:
        raise bad("'prompt' is required", "prompt", "missing_required_parameter")
    prompt = body["prompt"]
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, list):
        if not prompt or not all(_is_int(t) and t >= 0 for t in prompt):
            raise bad(
                "'prompt' must be a string, a list of one string or a non-empty list of token ids (integers >= 0); "
                "several prompts in one request are not supported",
                "prompt",
            )
    elif not isinstance(prompt, str):
        raise bad(f"'prompt' must be a string or a list of token ids, got a JSON {_json_kind(prompt)}", "prompt")
    stream, include_usage = _stream(body)
    return CompletionRequest(_model(body), prompt, _params(body, default_max_tokens), stream, include_usage)


def parse_chat(body: dict, default_max_tokens: int | None = None) -> ChatRequest:
    """``/v1/chat/completions``: ``messages`` of ``{"role", "content"}``, contents strings or lists of text parts."""
    messages = body.get("messages")
    if messages is None:
        raise bad("'messages' is required", "messages", "missing_required_parameter")
    if not isinstance(messages, list) or not messages:
        raise bad("'messages' must be a non-empty list of {role, content} objects", "messages")
    checked = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise bad(f"'{where}' must be an object with 'role' and 'content'", where)
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise bad(f"'{where}.role' must be a non-empty string (system, user, assistant, ...)", f"{where}.role")
        checked.append({"role": role, "content": _content(message.get("content"), f"{where}.content")})
    field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    stream, include_usage = _stream(body)
    return ChatRequest(_model(body), checked, _params(body, default_max_tokens, field), stream, include_usage)


def _content(content, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise bad(f'\'{where}[{j}]\' must be a text part {{"type": "text", "text": ...}}', f"{where}[{j}]")
            texts.append(part["text"])
        return "".join(texts)
    raise bad(f"'{where}' must be a string or a list of text parts", where)


# -- responses ----------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(completion: Completion) -> dict:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
    }


def completion_response(request_id: str, model: str, completion: Completion) -> dict:
    choice = {"index": 0, "text": completion.text, "logprobs": None, "finish_reason": completion.finish_reason}
    return _answer(request_id, "text_completion", model, [choice], usage=usage(completion), system_fingerprint=None)


def completion_chunk(request_id: str, model: str, text: str, finish_reason: str | None = None) -> dict:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    return _answer(request_id, "text_completion", model, [choice])


def chat_response(request_id: str, model: str, completion: Completion) -> dict:
    message = {"role": "assistant", "content": completion.text}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": completion.finish_reason}
    return _answer(request_id, "chat.completion", model, [choice], usage=usage(completion), system_fingerprint=None)


def chat_chunk(request_id: str, model: str, delta: dict, finish_reason: str | None = None) -> dict:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return _answer(request_id, "chat.completion.chunk", model, [choice])


def usage_chunk(request_id: str, model: str, kind: str, completion: Completion) -> dict:
    """The last chunk of a stream with ``stream_options.include_usage``: no choices, the usage."""
    return _answer(request_id, kind, model, [], usage=usage(completion))


def _answer(request_id: str, kind: str, model: str, choices: list[dict], **fields) -> dict:
    """OpenAI's envelope of a response or a stream chunk: id, object, created, model, choices, then ``fields``."""
    return {"id": request_id, "object": kind, "created": int(time.time()), "model": model, "choices": choices, **fields}
