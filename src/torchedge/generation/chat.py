"""Chat messages -> prompt text, with a model's chat template (Jinja, as `transformers` writes them).

Where the template comes from, first found: a file given by the user (a Jinja template, or a
``tokenizer_config.json`` holding one); beside the tokenizer file, ``<stem>.tokenizer_config.json``,
``tokenizer_config.json`` or ``chat_template.jinja`` (what ``save_pretrained`` writes); else
`DEFAULT_CHAT_TEMPLATE`. A template renders as `transformers`' ``apply_chat_template`` renders it:
a sandboxed environment with ``trim_blocks``/``lstrip_blocks``, loop controls, the ``{% generation %}``
tag, a ``tojson`` filter that keeps non-ASCII text, ``raise_exception`` and ``strftime_now``; the
variables ``messages``, ``tools``, ``documents``, ``add_generation_prompt`` and the tokenizer's special
tokens (``bos_token``, ``eos_token``, ...). The text is encoded without adding special tokens: the
template writes them. Jinja templates need ``jinja2`` (imported when one is compiled); the default
renders without it.
"""

from __future__ import annotations

import json
import os
from datetime import datetime

from torchedge.errors import InputError, TorchEdgeError

__all__ = ["DEFAULT_CHAT_TEMPLATE", "ChatTemplate", "special_tokens"]

# Zephyr's layout: each message after a <|role|> line, closed by the end-of-sequence token.
DEFAULT_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


class ChatTemplate:
    """Renders a conversation (a list of ``{"role", "content"}`` with string contents) to prompt text.

    ``tokens`` maps special-token names (``bos_token``, ``eos_token``, ...) to their text; the
    arguments of `render` take precedence.
    """

    def __init__(
        self, source: str | None = None, origin: str = "the default chat template", tokens: dict | None = None
    ):
        self.source = source
        self.origin = origin
        self.tokens = dict(tokens or {})
        self._compiled = None if source is None else _compile(source, origin)

    @classmethod
    def find(cls, tokenizer_path: str | None, template_file: str | None = None) -> ChatTemplate:
        """The template of ``template_file``, else the one beside the tokenizer, else the default."""
        tokens = {} if tokenizer_path is None else special_tokens(tokenizer_path)
        if template_file is not None:
            if not os.path.isfile(template_file):
                raise FileNotFoundError(f"no chat template file '{template_file}'")
            with open(template_file, encoding="utf-8") as f:
                text = f.read()
            if template_file.endswith(".json"):
                return cls(_from_config(_parse(text, template_file), template_file), template_file, tokens)
            return cls(text, template_file, tokens)
        for path in _beside(tokenizer_path):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if path.endswith(".jinja"):
                return cls(text, path, tokens)
            template = _from_config(_parse(text, path), path, required=False)
            if template is not None:
                return cls(template, path, tokens)
        return cls(tokens=tokens)

    def render(
        self, messages: list[dict], bos_token: str | None = None, eos_token: str | None = None, **variables
    ) -> str:
        """The prompt text; ``add_generation_prompt`` is True unless given."""
        tokens = dict(self.tokens)
        tokens.update({k: v for k, v in (("bos_token", bos_token), ("eos_token", eos_token)) if v is not None})
        if self._compiled is None:
            return _render_default(messages, tokens.get("bos_token", ""), tokens.get("eos_token", ""))
        context = {"tools": None, "documents": None, **tokens, "add_generation_prompt": True, **variables}
        try:
            return self._compiled.render(messages=messages, **context)
        except InputError:
            raise
        except Exception as e:  # a template's own error or a bug in it
            raise InputError(f"the chat template ({self.origin}) failed on these messages: {e}") from None


def special_tokens(tokenizer_path: str) -> dict[str, str]:
    """The text of the special tokens (``bos_token``, ``eos_token``, ...) in the configuration beside a tokenizer."""
    for path in _beside(tokenizer_path):
        if path.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                config = _parse(f.read(), path)
            tokens = {k: v for k, v in config.items() if k.endswith("_token")}
            texts = {k: v.get("content") if isinstance(v, dict) else v for k, v in tokens.items()}
            return {key: text for key, text in texts.items() if isinstance(text, str)}
    return {}


def _beside(tokenizer_path: str | None) -> list[str]:
    """The configuration files next to a tokenizer file, most specific first."""
    if tokenizer_path is None:
        return []
    directory = os.path.dirname(os.path.abspath(tokenizer_path))
    stem = os.path.basename(tokenizer_path).removesuffix(".json").removesuffix(".tokenizer")
    names = (f"{stem}.tokenizer_config.json", "tokenizer_config.json", "chat_template.jinja")
    return [p for p in (os.path.join(directory, n) for n in names) if os.path.isfile(p)]


def _parse(text: str, path: str) -> dict:
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"'{path}' is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise InputError(f"'{path}' must hold a JSON object, it holds {type(config).__name__}")
    return config


def _render_default(messages: list[dict], bos_token: str, eos_token: str) -> str:
    """`DEFAULT_CHAT_TEMPLATE`, rendered without Jinja."""
    body = "".join(f"<|{m['role']}|>\n{m['content']}{eos_token}\n" for m in messages)
    return f"{bos_token}{body}<|assistant|>\n"


def _from_config(config: dict, path: str, required: bool = True) -> str | None:
    """The ``chat_template`` of a tokenizer_config.json (a string, or a list of named templates: "default")."""
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if isinstance(template, str):
        return template
    if required:
        raise InputError(f"'{path}' has no chat_template (a string, or a list of {{name, template}})")
    return None


def _compile(source: str, origin: str):
    environment = _environment(origin)
    try:
        return environment.from_string(source)
    except Exception as e:  # jinja2's TemplateSyntaxError
        raise InputError(f"the chat template ({origin}) is not a valid Jinja template: {e}") from None


def _environment(origin: str):
    try:
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise TorchEdgeError(
            f"{origin} is a Jinja template, which needs the 'jinja2' package: pip install 'torchedge[generation]'"
        ) from None

    class Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` (marks assistant text for training): renders its body."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise InputError(f"the chat template refused the messages: {message}")

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env
