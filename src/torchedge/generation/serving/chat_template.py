"""Chat messages -> prompt text, with a model's chat template (Jinja, as `transformers` writes them).

Where the template comes from, first found: ``--chat-template FILE`` (a Jinja template, or a
``tokenizer_config.json`` holding one), the ``chat_template`` of a ``tokenizer_config.json``
(or ``<stem>.tokenizer_config.json``) beside the tokenizer file, else `DEFAULT_CHAT_TEMPLATE`.
The built-in models (`torchedge export llama-kv`, ...) have no chat format of their own: they get
the default. A template is rendered as `transformers`' ``apply_chat_template`` renders it
(``messages``, ``bos_token``, ``eos_token``, ``add_generation_prompt=True``, ``raise_exception``,
in a sandbox) and its text is encoded without adding special tokens: the template writes them.
Jinja templates need ``jinja2`` (in ``torchedge[serve]``); the default renders without it.
"""

from __future__ import annotations

import json
import os

from torchedge.errors import InputError, TorchEdgeError

__all__ = ["DEFAULT_CHAT_TEMPLATE", "ChatTemplate"]

# Zephyr's layout: each message after a <|role|> line, closed by the end-of-sequence token.
DEFAULT_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


class ChatTemplate:
    """Renders a conversation (a list of ``{"role", "content"}`` with string contents) to prompt text."""

    def __init__(self, source: str | None = None, origin: str = "the default chat template"):
        self.source = source
        self.origin = origin
        self._compiled = None
        if source is not None:
            self._compiled = _jinja_environment(origin).from_string(source)

    @classmethod
    def find(cls, tokenizer_path: str | None, template_file: str | None = None) -> ChatTemplate:
        """The template of ``template_file``, else the tokenizer's configuration's, else the default."""
        if template_file is not None:
            if not os.path.isfile(template_file):
                raise FileNotFoundError(f"--chat-template: no such file '{template_file}'")
            with open(template_file, encoding="utf-8") as f:
                text = f.read()
            if template_file.endswith(".json"):
                return cls(_from_config(json.loads(text), template_file), template_file)
            return cls(text, template_file)
        if tokenizer_path is not None:
            directory = os.path.dirname(os.path.abspath(tokenizer_path))
            stem = os.path.basename(tokenizer_path).removesuffix(".json").removesuffix(".tokenizer")
            for name in (f"{stem}.tokenizer_config.json", "tokenizer_config.json"):
                path = os.path.join(directory, name)
                if os.path.isfile(path):
                    with open(path, encoding="utf-8") as f:
                        template = _from_config(json.load(f), path, required=False)
                    if template is not None:
                        return cls(template, path)
        return cls()

    def render(self, messages: list[dict], bos_token: str = "", eos_token: str = "") -> str:
        if self._compiled is None:
            return _render_default(messages, bos_token, eos_token)
        try:
            return self._compiled.render(
                messages=messages, bos_token=bos_token, eos_token=eos_token, add_generation_prompt=True
            )
        except InputError:
            raise
        except Exception as e:  # a template's own error (raise_exception) or a bug in it
            raise InputError(f"the chat template ({self.origin}) failed on these messages: {e}") from None


def _render_default(messages: list[dict], bos_token: str, eos_token: str) -> str:
    """`DEFAULT_CHAT_TEMPLATE`, rendered without Jinja."""
    body = "".join(f"<|{m['role']}|>\n{m['content']}{eos_token}\n" for m in messages)
    return f"{bos_token}{body}<|assistant|>\n"


def _from_config(config, path: str, required: bool = True) -> str | None:
    """The ``chat_template`` of a tokenizer_config.json (a string, or a list of named templates: "default")."""
    template = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if isinstance(template, str):
        return template
    if required:
        raise InputError(f"'{path}' has no chat_template (a string, or a list of {{name, template}})")
    return None


def _jinja_environment(origin: str):
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise TorchEdgeError(
            f"{origin} is a Jinja template, which needs the 'jinja2' package: pip install 'torchedge[serve]'"
        ) from None

    def raise_exception(message):
        raise InputError(f"the chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env
