"""The HTTP side of `torchedge serve`: a Starlette application over a `ModelServer`.

Routes: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (OpenAI's, streamed as
server-sent events with ``"stream": true``), ``GET /v1/models``, ``GET /health``, ``POST /v1/run``
(any program: arrays in, arrays out, see `torchedge.generation.serving.arrays`) and ``GET /``, a
chat page. Starlette rather than FastAPI: the requests are checked by hand so that every error is
OpenAI's error object naming the field (FastAPI's validation answers 422 in its own shape), and the
extra then needs no pydantic. Whatever a route raises becomes such an error object (4xx for the
client's mistakes, 500 for the server's), never a crash.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from torchedge.generation.serving import protocol
from torchedge.generation.serving.arrays import check_inputs, decode_inputs, encode_outputs_json, encode_outputs_npz
from torchedge.generation.serving.page import CHAT_PAGE
from torchedge.generation.serving.protocol import APIError
from torchedge.generation.serving.service import ClientGone, ModelServer, Shape, error_object

__all__ = ["ModelServer", "create_app"]

log = logging.getLogger("torchedge.serve")


def _endpoint(handler: Callable[[ModelServer, Request], Awaitable[Response]], server: ModelServer):
    """A route calling ``handler``; whatever it raises becomes an OpenAI error response, never a crash."""

    async def route(request: Request) -> Response:
        try:
            return await handler(server, request)
        except ClientGone:
            return Response(status_code=499)  # nginx's "client closed request": nobody reads it
        except Exception as e:
            status, body = error_object(e)
            if status >= 500:
                log.exception("%s %s failed", request.method, request.url.path)
            headers = {"Retry-After": "1"} if status in (429, 503) else None
            return JSONResponse(body, status_code=status, headers=headers)

    return route


async def _read_body(server: ModelServer, request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > server.max_body_bytes:
        raise APIError(
            413, f"the body is {declared} bytes, more than the limit of {server.max_body_bytes}", None, "body_too_large"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > server.max_body_bytes:
            raise APIError(
                413, f"the body is more than the limit of {server.max_body_bytes} bytes", None, "body_too_large"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def _completions(server: ModelServer, request: Request) -> Response:
    parsed = protocol.parse_completion(protocol.parse_json(await _read_body(server, request)))
    server.check_model(parsed.model)
    return await _generate(server, request, parsed, server.completion_prompt(parsed), chat=False)


async def _chat(server: ModelServer, request: Request) -> Response:
    parsed = protocol.parse_chat(protocol.parse_json(await _read_body(server, request)))
    server.check_model(parsed.model)
    return await _generate(server, request, parsed, server.chat_prompt(parsed), chat=True)


async def _generate(
    server: ModelServer,
    request: Request,
    parsed: protocol.CompletionRequest | protocol.ChatRequest,
    ids: list[int],
    chat: bool,
) -> Response:
    shape = Shape(chat, server.model_name, parsed.include_usage)
    return await server.generate(request, ids, parsed.params, parsed.stream, shape)


async def _run(server: ModelServer, request: Request) -> Response:
    body = await _read_body(server, request)
    method, inputs = decode_inputs(body, request.headers.get("content-type", ""), request.query_params.get("method"))
    program = server.pool.slots[0].program
    if method not in program.method_names:  # type: ignore[attr-defined]
        names = ", ".join(program.method_names)  # type: ignore[attr-defined]
        raise APIError(404, f"the program has no method '{method}'; methods: {names}", "method", "method_not_found")
    arrays = check_inputs(inputs, program.metadata(method))  # type: ignore[attr-defined]
    slot = await server.acquire(request)
    outputs = await server.pool.run(slot, lambda: slot.method(method).execute(arrays))
    wants_npz = request.query_params.get("format") == "npz" or "application/x-npz" in request.headers.get("accept", "")
    if wants_npz:
        return Response(encode_outputs_npz(outputs), media_type="application/x-npz")
    return Response(encode_outputs_json(method, outputs), media_type="application/json")


def _model_card(server: ModelServer) -> dict:
    return {"id": server.model_name, "object": "model", "created": server.created, "owned_by": "torchedge"}


async def _models(server: ModelServer, request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [_model_card(server)]})


async def _model(server: ModelServer, request: Request) -> Response:
    server.check_model(request.path_params["model"])
    return JSONResponse(_model_card(server))


async def _health(server: ModelServer, request: Request) -> Response:
    pool = server.pool
    return JSONResponse(
        {
            "status": "ok",
            "model": server.model_name,
            "text_generation": server.not_text_model is None and server.tokenizer is not None,
            "max_seq_len": server.max_seq_len,
            "slots": len(pool.slots),
            "busy": pool.busy,
            "waiting": pool.waiting,
            "served": pool.served,
            "cancelled": pool.cancelled,
        }
    )


async def _page(server: ModelServer, request: Request) -> Response:
    return HTMLResponse(CHAT_PAGE.replace("{{MODEL}}", html.escape(server.model_name)))


async def _http_error(request: Request, error: Exception) -> Response:
    status = error.status_code if isinstance(error, HTTPException) else 500
    detail = error.detail if isinstance(error, HTTPException) else str(error)
    message = f"{request.method} {request.url.path}: {detail}"
    return JSONResponse(APIError(status, message, None, None).body(), status_code=status)


def create_app(server: ModelServer) -> Starlette:
    """The ASGI application serving ``server`` (run it with uvicorn)."""
    routes = [
        Route("/", _endpoint(_page, server), methods=["GET"]),
        Route("/health", _endpoint(_health, server), methods=["GET"]),
        Route("/v1/models", _endpoint(_models, server), methods=["GET"]),
        Route("/v1/models/{model:path}", _endpoint(_model, server), methods=["GET"]),
        Route("/v1/completions", _endpoint(_completions, server), methods=["POST"]),
        Route("/v1/chat/completions", _endpoint(_chat, server), methods=["POST"]),
        Route("/v1/run", _endpoint(_run, server), methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.server = server
    return app
