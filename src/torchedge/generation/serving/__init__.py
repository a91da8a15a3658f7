"""`torchedge serve`: an OpenAI-compatible HTTP server for a `.pte` on the NumPy runtime.

Needs the ``serve`` extra (``pip install 'torchedge[serve]'``: Starlette, uvicorn, jinja2) and,
for text, ``tokenizers``; like the rest of `torchedge.generation`, never torch. The pieces:
`engine` (slots: one load of the program's bytes, a KV cache per concurrent conversation, a
bounded waiting line), `protocol` (OpenAI's requests and errors), `arrays` (``/v1/run``), `app`
(the Starlette routes); chat templates and stop strings are `torchedge.generation`'s. See docs/serving.md.
"""

from __future__ import annotations

__all__ = ["ModelServer", "create_app", "serve"]


def __getattr__(name: str):
    # The web framework loads with the app, not with `import torchedge.generation.serving.engine`.
    if name in ("ModelServer", "create_app"):
        from torchedge.generation.serving import app

        return getattr(app, name)
    if name == "serve":
        from torchedge.generation.serving.server import serve

        return serve
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
