"""`torchedge serve`: an OpenAI-compatible HTTP server for a .pte on the NumPy runtime."""

from __future__ import annotations

from torchedge.cli.loading import check_data_paths, check_program_path
from torchedge.errors import TorchEdgeError

__all__ = ["cmd_serve"]


def cmd_serve(args) -> int:
    """Load the program once (``--max-concurrency`` slots over its bytes) and serve it until interrupted."""
    check_program_path(args.pte)
    data = check_data_paths(args.data_path)
    try:
        from torchedge.generation.serving.app import ModelServer
        from torchedge.generation.serving.server import serve
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("starlette", "uvicorn", "anyio"):
            raise TorchEdgeError(
                f"torchedge serve needs the '{e.name.split('.')[0]}' package, which is not installed: "
                "pip install 'torchedge[serve]'"
            ) from None
        raise
    server = ModelServer.from_path(
        args.pte,
        tokenizer=args.tokenizer,
        chat_template=args.chat_template,
        data_paths=data,
        model_name=args.model_name,
        max_concurrency=args.max_concurrency,
        max_queue=args.max_queue,
        queue_timeout=args.queue_timeout,
    )
    kind = "text generation and /v1/run" if server.not_text_model is None and server.tokenizer else "/v1/run"
    if server.not_text_model is None and server.tokenizer is None:
        kind += " (no tokenizer found: pass --tokenizer for the text endpoints)"
    print(
        f"serving '{server.model_name}' ({kind}) with {args.max_concurrency} slot(s) on "
        f"http://{args.host}:{args.port} (chat page at /, OpenAI API under /v1); Ctrl-C stops",
        flush=True,
    )
    serve(server, args.host, args.port, args.log_level)
    return 0
