"""`ModelServer`: what the routes of `torchedge.generation.serving.app` serve.

A request holds a slot (`SlotPool`) while it generates; requests beyond ``max_concurrency`` wait,
at most ``max_queue`` of them and ``queue_timeout`` seconds each (then 429 ``queue_full`` or 503
``queue_timeout``, with ``Retry-After``). A client that goes away, while waiting or while its reply
streams, gives its slot back: the generation stops at its next token.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from torchedge.errors import InputError, TorchEdgeError
from torchedge.generation.chat import ChatTemplate
from torchedge.generation.serving import protocol
from torchedge.generation.serving.engine import (
    Busy,
    Cancelled,
    Completion,
    GenerationParams,
    SlotPool,
    generate_text,
    load_slots,
)
from torchedge.generation.serving.protocol import APIError, bad

__all__ = ["ClientGone", "ModelServer", "Shape", "error_object", "find_tokenizer"]

DEFAULT_MAX_BODY_BYTES = 64 << 20
_END = object()  # the last item of a generation's text queue


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


class ModelServer:
    """What the routes serve: a program's slots, its tokenizer and chat template, the waiting line.

    ``program_factory()`` returns a new `Program` over the same bytes each call (see
    `torchedge.generation.serving.engine`); `from_path` makes one from a ``.pte`` path. The
    text endpoints need a KV-cache LM program (`TextGenerator`'s convention) and a tokenizer;
    ``/v1/run`` serves any program.
    """

    def __init__(
        self,
        program_factory: Callable[[], object],
        *,
        model_name: str,
        tokenizer=None,
        chat_template: ChatTemplate | None = None,
        max_concurrency: int = 1,
        max_queue: int = 64,
        queue_timeout: float = 60.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ):
        slots, self.not_text_model = load_slots(program_factory, max_concurrency)
        self.pool = SlotPool(slots, max_queue, queue_timeout)
        self.model_name = model_name
        self.tokenizer = tokenizer
        self.chat_template = chat_template or ChatTemplate()
        self.max_body_bytes = max_body_bytes
        self.created = int(time.time())
        generator = slots[0].generator
        self.max_seq_len = None if generator is None else generator.max_seq_len
        self.vocab_size = None if generator is None else generator.vocab_size
        self.stop_tokens: tuple[int, ...] = ()
        if generator is not None:  # as `torchedge generate`: the program's end-of-sequence ids, else the tokenizer's
            eos = tokenizer.eos_id if tokenizer is not None else None
            self.stop_tokens = generator.eos_ids or tuple(i for i in (eos,) if i is not None)

    @classmethod
    def from_path(
        cls,
        pte: str,
        *,
        tokenizer: str | None = None,
        chat_template: str | None = None,
        data_paths: Sequence[str] = (),
        model_name: str | None = None,
        **options,
    ) -> ModelServer:
        """Serve the ``.pte`` at ``pte``. ``tokenizer``: a tokenizer.json (default: ``<stem>.tokenizer.json``
        beside the program, as `torchedge export llama-kv` writes it, else a ``tokenizer.json`` there)."""
        from torchedge.runtime import Runtime
        from torchedge.runtime.data_loader import loader_for

        loader = loader_for(pte)  # one load of the bytes; every slot's constants are views onto it
        data = [loader_for(path, what=".ptd file") for path in data_paths]
        runtime = Runtime.get()

        def factory():
            return runtime.load_program(loader, data_path=data or None)

        tokenizer_path = tokenizer or find_tokenizer(pte)
        loaded = None
        if tokenizer_path is not None:
            from torchedge.generation.tokenizer import Tokenizer

            loaded = Tokenizer.from_file(tokenizer_path)
        name = model_name or os.path.splitext(os.path.basename(pte))[0]
        template = ChatTemplate.find(tokenizer_path, chat_template)
        return cls(factory, model_name=name, tokenizer=loaded, chat_template=template, **options)

    def close(self) -> None:
        self.pool.close()

    # -- the text endpoints ---------------------------------------------------------------------

    def _text_model(self):
        if self.not_text_model is not None:
            raise APIError(
                400,
                f"model '{self.model_name}' is not a KV-cache language model ({self.not_text_model}): "
                "run it with POST /v1/run",
                "model",
                "model_not_text_generation",
            )
        if self.tokenizer is None:
            raise APIError(
                400,
                f"model '{self.model_name}' is served without a tokenizer: restart the server with --tokenizer FILE",
                "model",
                "no_tokenizer",
            )
        return self.tokenizer

    def check_model(self, model: str | None) -> None:
        if model is not None and model != self.model_name:
            raise APIError(
                404,
                f"the model '{model}' does not exist: this server serves '{self.model_name}' (GET /v1/models)",
                "model",
                "model_not_found",
            )

    def _check_prompt(self, ids: list[int], field: str) -> list[int]:
        if not ids:
            raise bad(f"'{field}' encodes to no tokens (and the tokenizer adds no bos token)", field)
        if self.vocab_size is not None and max(ids) >= self.vocab_size:
            raise bad(f"'{field}' holds token id {max(ids)}, outside the vocabulary of {self.vocab_size}", field)
        if self.max_seq_len is not None and len(ids) >= self.max_seq_len:
            raise APIError(
                400,
                f"'{field}' is {len(ids)} tokens long but the model's cache holds {self.max_seq_len} positions: "
                f"at most {self.max_seq_len - 1} prompt tokens leave room for one new token",
                field,
                "context_length_exceeded",
            )
        return ids

    def _resolve(self, params: GenerationParams, prompt_length: int) -> GenerationParams:
        """The max_tokens a generation gets: the request's, else up to the cache's end."""
        if params.max_tokens is not None:
            return params
        room = 256 if self.max_seq_len is None else self.max_seq_len - prompt_length
        return dataclasses.replace(params, max_tokens=room)

    def completion_prompt(self, request: protocol.CompletionRequest) -> list[int]:
        tokenizer = self._text_model()
        ids = request.prompt if isinstance(request.prompt, list) else tokenizer.encode(request.prompt)
        return self._check_prompt(list(ids), "prompt")

    def chat_prompt(self, request: protocol.ChatRequest) -> list[int]:
        tokenizer = self._text_model()
        bos = "" if tokenizer.bos_id is None else tokenizer.decode([tokenizer.bos_id], skip_special_tokens=False)
        eos = "" if tokenizer.eos_id is None else tokenizer.decode([tokenizer.eos_id], skip_special_tokens=False)
        try:
            text = self.chat_template.render(request.messages, bos, eos)
        except InputError as e:
            raise bad(str(e), "messages") from None
        return self._check_prompt(tokenizer.encode(text, add_special_tokens=False), "messages")

    async def acquire(self, request: Request):
        """A free slot, waiting while the client is still there (`ClientGone` when it leaves)."""
        waiting = asyncio.ensure_future(self.pool.acquire())
        if await _first_or_disconnect(request, waiting):
            return waiting.result()
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Busy):
            self.pool.release(await waiting)  # it got a slot as the client left
        raise ClientGone

    async def generate(
        self, request: Request, prompt_ids: list[int], params: GenerationParams, stream: bool, shape: Shape
    ) -> Response:
        params = self._resolve(params, len(prompt_ids))
        slot = await self.acquire(request)
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue = asyncio.Queue()
        cancel = threading.Event()

        def emit(text: str) -> None:
            loop.call_soon_threadsafe(pieces.put_nowait, text)

        def work() -> Completion:
            try:
                assert slot.generator is not None  # _text_model checked it
                return generate_text(slot.generator, self.tokenizer, prompt_ids, params, self.stop_tokens, emit, cancel)
            finally:
                loop.call_soon_threadsafe(pieces.put_nowait, _END)

        job = asyncio.ensure_future(self.pool.run(slot, work))
        job.add_done_callback(self._count)
        if stream:
            return StreamingResponse(
                self._events(job, pieces, cancel, shape),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        try:
            if not await _first_or_disconnect(request, job):
                cancel.set()
                raise ClientGone
        except asyncio.CancelledError:
            cancel.set()
            raise
        return JSONResponse(shape.response(job.result()))

    def _count(self, job: asyncio.Future) -> None:
        if job.cancelled() or isinstance(job.exception(), Cancelled):
            self.pool.cancelled += 1
        else:
            self.pool.served += 1

    async def _events(self, job: asyncio.Future, pieces: asyncio.Queue, cancel: threading.Event, shape: Shape):
        try:
            first = shape.first_chunk()
            if first is not None:
                yield _sse(first)
            while (piece := await pieces.get()) is not _END:
                yield _sse(shape.chunk(piece))
            try:
                completion = await job
            except Exception as e:  # the generation failed after the reply started: say so in the stream
                yield _sse(error_object(e)[1])
            else:
                yield _sse(shape.chunk("", completion.finish_reason))
                if shape.include_usage:
                    yield _sse(shape.usage_chunk(completion))
            yield "data: [DONE]\n\n"
        finally:
            cancel.set()  # the client left (or the reply is complete): a running generation stops


@dataclasses.dataclass
class Shape:
    """How one request's answer is written: chat or text completion, its id and model name."""

    chat: bool
    model: str
    include_usage: bool = False
    id: str = ""

    def __post_init__(self):
        self.id = protocol.new_id("chatcmpl" if self.chat else "cmpl")

    def response(self, completion: Completion) -> dict:
        make = protocol.chat_response if self.chat else protocol.completion_response
        return make(self.id, self.model, completion)

    def first_chunk(self) -> dict | None:
        return protocol.chat_chunk(self.id, self.model, {"role": "assistant", "content": ""}) if self.chat else None

    def chunk(self, text: str, finish_reason: str | None = None) -> dict:
        if self.chat:
            return protocol.chat_chunk(self.id, self.model, {"content": text} if text else {}, finish_reason)
        return protocol.completion_chunk(self.id, self.model, text, finish_reason)

    def usage_chunk(self, completion: Completion) -> dict:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return protocol.usage_chunk(self.id, self.model, kind, completion)


def _sse(data: dict) -> str:
    return f"data: {json.dumps(data)}\n\n"


async def _first_or_disconnect(request: Request, work: Awaitable) -> bool:
    """Wait for ``work``; True when it finished, False when the client disconnected first."""
    work = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    return work.done()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def find_tokenizer(pte: str) -> str | None:
    """``<stem>.tokenizer.json`` beside the program (`torchedge export llama-kv` writes it), else ``tokenizer.json``."""
    stem = os.path.splitext(pte)[0]
    for path in (f"{stem}.tokenizer.json", os.path.join(os.path.dirname(pte), "tokenizer.json")):
        if os.path.isfile(path):
            return path
    return None


def error_object(error: BaseException) -> tuple[int, dict]:
    """(HTTP status, OpenAI error object) of an exception a request raised."""
    if isinstance(error, APIError):
        return error.status, error.body()
    if isinstance(error, Busy):
        status = 429 if error.code == "queue_full" else 503
        kind = "rate_limit_error" if status == 429 else "server_error"
        return status, APIError(status, str(error), None, error.code, kind).body()
    if isinstance(error, InputError):
        return 400, APIError(400, str(error), None, "invalid_value").body()
    if isinstance(error, TorchEdgeError):
        return 500, APIError(500, str(error), None, "runtime_error", "server_error").body()
    return 500, APIError(500, f"internal error: {type(error).__name__}: {error}", None, None, "server_error").body()
