"""`torchedge serve`: the OpenAI API on a tiny Llama .pte, driven by the real `openai` client.

Answers are checked against what the same prompt gives alone on the generation runner
(`serve_support.Reference`) and against `torchedge generate`. Load, concurrency and hang-ups
are in test_serve_load.py, ``/v1/run`` in test_serve_run.py, the chat page in test_serve_page.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from tests.generation.serve_support import (  # noqa: E402
    GOLDEN,
    LIFETIME,
    PROMPTS,
    Reference,
    ServeProcess,
)
from torchedge.generation import ChatTemplate, StopText  # noqa: E402
from torchedge.generation.chat import DEFAULT_CHAT_TEMPLATE  # noqa: E402
from torchedge.generation.serving.app import ModelServer  # noqa: E402
from torchedge.generation.serving.server import ServerThread  # noqa: E402


@pytest.fixture(scope="module")
def server(llama_kv):
    """A server with 4 slots, shared by the tests that need no special settings."""
    with ServerThread(ModelServer.from_path(str(llama_kv[0]), max_concurrency=4), lifetime=LIFETIME) as url:
        yield url


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def alone(llama_kv, tokenizer):
    return Reference(llama_kv[0], tokenizer)


# -- answers equal the runner's ----------------------------------------------------------------


def test_greedy_completion_and_chat_equal_the_runner(client, tokenizer, alone):
    for prompt in PROMPTS[:2]:
        got = client.completions.create(model="llama-kv", prompt=prompt, max_tokens=20, temperature=0)
        want = alone(tokenizer.encode(prompt), 20)
        assert got.choices[0].text == want.text and got.choices[0].finish_reason == want.finish_reason
        assert (got.usage.prompt_tokens, got.usage.completion_tokens) == (want.prompt_tokens, want.completion_tokens)
        assert got.usage.total_tokens == want.prompt_tokens + want.completion_tokens
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello, how are you?"}]
    got = client.chat.completions.create(model="llama-kv", messages=messages, max_tokens=16, temperature=0)
    want = alone(alone.chat_ids(messages), 16)
    assert got.choices[0].message.content == want.text and got.choices[0].message.role == "assistant"
    assert got.usage.prompt_tokens == len(alone.chat_ids(messages)) and got.usage.completion_tokens == 16


def test_completion_equals_torchedge_generate(llama_kv, client, capsys):
    from torchedge.cli.main import main

    pte, tok = llama_kv
    assert (
        main(["generate", str(pte), "--tokenizer", str(tok), "--prompt", "Once upon a time", "--max-new-tokens", "12"])
        == 0
    )
    printed = capsys.readouterr().out
    text = printed[: printed.rstrip("\n").rindex("\n")]  # the text, then one line of rates
    got = client.completions.create(model="llama-kv", prompt="Once upon a time", max_tokens=12, temperature=0)
    assert got.choices[0].text == text


def test_streamed_chunks_join_to_the_text(client):
    plain = client.completions.create(model="llama-kv", prompt="Hello", max_tokens=24, temperature=0)
    chunks = list(
        client.completions.create(
            model="llama-kv",
            prompt="Hello",
            max_tokens=24,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == plain.choices[0].text
    assert chunks[-2].choices[0].finish_reason == plain.choices[0].finish_reason
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens and not chunks[-1].choices

    messages = [{"role": "user", "content": "Tell me a story"}]
    plain = client.chat.completions.create(model="llama-kv", messages=messages, max_tokens=24, temperature=0)
    chunks = list(
        client.chat.completions.create(model="llama-kv", messages=messages, max_tokens=24, temperature=0, stream=True)
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == plain.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == plain.choices[0].finish_reason
    assert len({c.id for c in chunks}) == 1


def test_seed_reproduces_sampled_text(client, tokenizer, alone):
    sampling = dict(temperature=0.9, top_p=0.95, seed=7)
    texts = [
        client.completions.create(model="llama-kv", prompt="Hello", max_tokens=16, extra_body={"top_k": 40}, **sampling)
        .choices[0]
        .text
        for _ in range(2)
    ]
    assert texts[0] == texts[1] == alone(tokenizer.encode("Hello"), 16, top_k=40, **sampling).text
    other = client.completions.create(
        model="llama-kv", prompt="Hello", max_tokens=16, temperature=0.9, top_p=0.95, seed=8
    )
    assert other.choices[0].text != texts[0]


def test_stop_strings_cut_the_text(client, tokenizer, alone):
    full = alone(tokenizer.encode("Once upon a time"), 30).text
    stop = full[10:13]
    want = full[: full.index(stop)]
    for stream in (False, True):
        got = client.completions.create(
            model="llama-kv", prompt="Once upon a time", max_tokens=30, temperature=0, stop=[stop], stream=stream
        )
        if stream:
            chunks = list(got)
            text, finish = "".join(c.choices[0].text for c in chunks), chunks[-1].choices[0].finish_reason
        else:
            text, finish = got.choices[0].text, got.choices[0].finish_reason
        assert (text, finish) == (want, "stop")


def test_stop_text_holds_back_a_possible_stop():
    text = StopText(["END", "xy"])
    assert [text.push(p) for p in ("ab", "cE", "N", "x", "z")] == ["ab", "c", "", "EN", "xz"]
    assert text.push("aEND!") == "a" and text.stopped and text.text == "abcENxza"
    assert text.push("more") == "" and text.flush() == ""
    assert StopText([]).push("abc") == "abc"


def test_models_health_and_page(server):
    models = httpx.get(f"{server}/v1/models").json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["llama-kv"]
    assert httpx.get(f"{server}/v1/models/llama-kv").json()["id"] == "llama-kv"
    health = httpx.get(f"{server}/health").json()
    assert (
        health["status"] == "ok" and health["slots"] == 4 and health["text_generation"] and health["max_seq_len"] == 128
    )
    page = httpx.get(f"{server}/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert (
        "/v1/chat/completions" in page.text and "http" not in page.text.split("<script>")[1]
    )  # nothing fetched from elsewhere


# -- bad requests ------------------------------------------------------------------------------

BAD_COMPLETIONS = [
    (b"{not json", 400, None, "invalid_json"),
    (b"[1, 2]", 400, None, "invalid_json"),
    (b'{"model": "gpt-9", "prompt": "hi"}', 404, "model", "model_not_found"),
    (b'{"prompt": "hi", "max_tokens": -3}', 400, "max_tokens", "invalid_value"),
    (b'{"prompt": "hi", "max_tokens": 1.5}', 400, "max_tokens", "invalid_value"),
    (b'{"prompt": "hi", "temperature": 5}', 400, "temperature", "invalid_value"),
    (b'{"prompt": "hi", "top_p": 0}', 400, "top_p", "invalid_value"),
    (b'{"prompt": "hi", "seed": -1}', 400, "seed", "invalid_value"),
    (b'{"prompt": "hi", "stop": [1]}', 400, "stop", "invalid_value"),
    (b'{"prompt": "hi", "stream": "yes"}', 400, "stream", "invalid_value"),
    (b'{"prompt": "hi", "n": 3}', 400, "n", "invalid_value"),
    (b'{"prompt": "hi", "logprobs": 2}', 400, "logprobs", "unsupported_parameter"),
    (b'{"max_tokens": 3}', 400, "prompt", "missing_required_parameter"),
    (b'{"prompt": [1, 100000]}', 400, "prompt", "invalid_value"),
    (json.dumps({"prompt": "word " * 200}).encode(), 400, "prompt", "context_length_exceeded"),
]


@pytest.mark.parametrize("body, status, param, code", BAD_COMPLETIONS)
def test_bad_completion_requests_name_the_field(server, body, status, param, code):
    reply = httpx.post(f"{server}/v1/completions", content=body, headers={"Content-Type": "application/json"})
    assert reply.status_code == status
    error = reply.json()["error"]
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")
    assert error["message"] and (param is None or param in error["message"])


@pytest.mark.parametrize(
    "messages, param",
    [
        (None, "messages"),
        ([], "messages"),
        ([{"content": "hi"}], "messages[0].role"),
        ([{"role": "user", "content": 3}], "messages[0].content"),
        ([{"role": "user", "content": "story " * 200}], "messages"),
    ],
)
def test_bad_chat_requests_name_the_field(client, messages, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="llama-kv", messages=messages, max_tokens=4)  # type: ignore[arg-type]
    assert caught.value.status_code == 400 and caught.value.body["param"] == param


BAD_CHATS = [
    (b'{"messages": [{"role": "user", "content": "hi"}',  400, None, "invalid_json"),
    (b'{"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}', 404, "model", "model_not_found"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}', 400, "max_tokens", "invalid_value"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -1}', 400,
     "max_completion_tokens", "invalid_value"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}}', 400,
     "stream_options", "invalid_value"),
]  # fmt: skip


@pytest.mark.parametrize("body, status, param, code", BAD_CHATS)
def test_bad_chat_bodies_name_the_field(server, body, status, param, code):
    reply = httpx.post(f"{server}/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert reply.status_code == status
    error = reply.json()["error"]
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")
    assert error["message"] and (param is None or param in error["message"])


def test_unknown_routes_and_methods_are_json_errors(server):
    assert httpx.get(f"{server}/v2/nothing").json()["error"]["message"].endswith("Not Found")
    reply = httpx.get(f"{server}/v1/chat/completions")
    assert reply.status_code == 405 and "error" in reply.json()
    assert httpx.get(f"{server}/health").json()["status"] == "ok"  # and the server is still up


# -- chat templates ----------------------------------------------------------------------------


def test_the_default_template_renders_like_its_jinja(tmp_path, llama_kv):
    pytest.importorskip("jinja2")
    messages = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}]
    assert ChatTemplate(DEFAULT_CHAT_TEMPLATE).render(messages, "<s>", "</s>") == ChatTemplate().render(
        messages, "<s>", "</s>"
    )
    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}>")
    assert ChatTemplate.find(None, str(template)).render(messages) == "[system] Be kind.\n[user] Hi\n>"
    # a tokenizer_config.json beside the tokenizer gives the template (as transformers writes it)
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_bytes(llama_kv[1].read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[-1].content }}!"}))
    assert ChatTemplate.find(str(tokenizer)).render(messages) == "Hi!"
    assert ChatTemplate.find(str(llama_kv[1])).source is None  # the built-in models: the default


# -- no torch; the command line -----------------------------------------------------------------

NO_TORCH = """
import sys, json, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith(("torch.", "executorch", "torchedge.exir")):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
from starlette.testclient import TestClient
from torchedge.generation.serving.app import ModelServer, create_app
with TestClient(create_app(ModelServer.from_path(sys.argv[1]))) as http:
    text = http.post("/v1/completions", json={"prompt": "Hello", "max_tokens": 4, "temperature": 0}).json()
with TestClient(create_app(ModelServer.from_path(sys.argv[2]))) as http:
    run = http.post("/v1/run", json={"inputs": [[[0.5] * 8] * 2]}).status_code
bad = [m for m in sys.modules if m == "torch" or m.startswith(("torch.", "torchedge.exir"))]
print(json.dumps({"tokens": text["usage"]["completion_tokens"], "run": run, "bad": bad}))
"""


def test_the_server_imports_no_torch(llama_kv):
    result = subprocess.run(
        [sys.executable, "-c", NO_TORCH, str(llama_kv[0]), str(GOLDEN / "mlp.pte")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"tokens": 4, "run": 200, "bad": []}


def test_torchedge_serve_command(llama_kv, alone):
    with ServeProcess(llama_kv[0], "--max-concurrency", "2") as served:
        assert "with 2 slot(s)" in served.banner
        client = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0, timeout=60)
        messages = [{"role": "user", "content": "Hi"}]
        reply = client.chat.completions.create(model="llama-kv", messages=messages, max_tokens=5, temperature=0)
    assert reply.choices[0].message.content == alone(alone.chat_ids(messages), 5).text


def test_serve_refuses_a_directory(tmp_path, capsys):
    from torchedge.cli.main import main

    assert main(["serve", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
