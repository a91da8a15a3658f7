"""`torchedge serve`: the OpenAI API on a tiny Llama .pte, driven by the real `openai` client.

Every server here listens on 127.0.0.1 and a port of its own, in a thread that stops when its
test ends or, whatever happens, after a bounded lifetime. Answers are checked against the
generation runner (`TextGenerator`) on the same prompt, and against `torchedge generate`.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from torchedge.generation import TextGenerator, Tokenizer  # noqa: E402
from torchedge.generation.serving.app import ModelServer  # noqa: E402
from torchedge.generation.serving.chat_template import DEFAULT_CHAT_TEMPLATE, ChatTemplate  # noqa: E402
from torchedge.generation.serving.engine import GenerationParams, StopText, generate_text  # noqa: E402
from torchedge.generation.serving.server import ServerThread  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.runtime.data_loader import loader_for  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
LIFETIME = 240  # seconds: a server thread stops by itself then, whatever the test does
NO_STOP = 9999  # a token id the model never produces


@pytest.fixture(scope="session")
def llama_kv(tmp_path_factory):
    """The tiny Llama with a KV cache and its tokenizer, as `torchedge export llama-kv` writes them."""
    pytest.importorskip("transformers")
    from torchedge.cli.main import main

    pte = tmp_path_factory.mktemp("serve") / "llama-kv.pte"
    assert main(["export", "llama-kv", "-o", str(pte)]) == 0
    return pte, pte.with_name("llama-kv.tokenizer.json")


@pytest.fixture(scope="module")
def tokenizer(llama_kv):
    return Tokenizer.from_file(llama_kv[1])


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
    """What a prompt gives on a generator of its own: the reference for every answer."""
    generator = TextGenerator(Runtime.get().load_program(str(llama_kv[0])))
    stop = generator.eos_ids

    def run(ids, max_tokens, stop_strings=(), **sampling):
        params = GenerationParams(max_tokens, stop=tuple(stop_strings), **{"temperature": 0.0, **sampling})
        return generate_text(generator, tokenizer, list(ids), params, stop)

    return run


def chat_ids(tokenizer, messages):
    text = ChatTemplate().render(messages, "<s>", "</s>")
    return tokenizer.encode(text, add_special_tokens=False)


PROMPTS = ["Once upon a time", "Hello", "The quick brown fox jumps over the lazy dog. " * 3, "It read one token"]


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
    want = alone(chat_ids(tokenizer, messages), 16)
    assert got.choices[0].message.content == want.text and got.choices[0].message.role == "assistant"
    assert got.usage.prompt_tokens == len(chat_ids(tokenizer, messages)) and got.usage.completion_tokens == 16


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


def test_unknown_routes_and_methods_are_json_errors(server):
    assert httpx.get(f"{server}/v2/nothing").json()["error"]["message"].endswith("Not Found")
    reply = httpx.get(f"{server}/v1/chat/completions")
    assert reply.status_code == 405 and "error" in reply.json()
    assert httpx.get(f"{server}/health").json()["status"] == "ok"  # and the server is still up


# -- concurrency -------------------------------------------------------------------------------


def _request(url, kind, prompt, max_tokens, stream, sampling):
    """One request over a client of its own: (text, finish_reason)."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
    if kind == "chat":
        reply = client.chat.completions.create(
            model="llama-kv",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            stream=stream,
            **sampling,
        )
        if stream:
            chunks = list(reply)
            return "".join(c.choices[0].delta.content or "" for c in chunks), chunks[-1].choices[0].finish_reason
        return reply.choices[0].message.content, reply.choices[0].finish_reason
    reply = client.completions.create(model="llama-kv", prompt=prompt, max_tokens=max_tokens, stream=stream, **sampling)
    if stream:
        chunks = list(reply)
        return "".join(c.choices[0].text for c in chunks), chunks[-1].choices[0].finish_reason
    return reply.choices[0].text, reply.choices[0].finish_reason


def test_concurrent_clients_each_get_what_they_get_alone(server, tokenizer, alone):
    """16 clients x 2 requests on 4 slots (the benchmark runs 16 x 8): mixed prompt lengths,
    chat and completions, streaming on and off, greedy and seeded sampling; none lost."""
    clients, per_client = 16, 2
    jobs = []
    for c in range(clients):
        for r in range(per_client):
            n = c * per_client + r
            kind = "chat" if n % 3 == 0 else "completion"
            prompt = PROMPTS[n % len(PROMPTS)]
            sampling = {"temperature": 0} if n % 2 else {"temperature": 0.8, "seed": n}
            jobs.append((c, kind, prompt, 8 + 5 * (n % 4), n % 2 == 0, sampling))

    def expected(kind, prompt, max_tokens, sampling):
        ids = chat_ids(tokenizer, [{"role": "user", "content": prompt}]) if kind == "chat" else tokenizer.encode(prompt)
        want = alone(ids, max_tokens, **sampling)
        return want.text, want.finish_reason

    def one_client(c):
        return [_request(server, *job[1:]) for job in jobs if job[0] == c]

    with ThreadPoolExecutor(clients) as pool:
        results = [r for rs in pool.map(one_client, range(clients)) for r in rs]
    assert len(results) == len(jobs)
    for job, got in zip(sorted(jobs, key=lambda j: j[0]), results):
        assert got == expected(job[1], job[2], job[3], job[5]), job
    health = httpx.get(f"{server}/health").json()
    assert health["busy"] == 0 and health["waiting"] == 0


class SlowProgram:
    """A program whose methods take ``delay`` seconds more per call: generations long enough to
    drop a client in the middle of one."""

    def __init__(self, program, delay):
        self._program, self._delay = program, delay
        self.method_names = program.method_names
        self.metadata = program.metadata

    def load_method(self, name):
        method, delay = self._program.load_method(name), self._delay

        class Slow:
            def execute(self, inputs):
                time.sleep(delay)
                return method.execute(inputs)

        return Slow()


@pytest.fixture
def slow_server(llama_kv, tokenizer):
    """One slot, a waiting line of 1, 50 ms per model call."""
    loader = loader_for(str(llama_kv[0]))
    server = ModelServer(
        lambda: SlowProgram(Runtime.get().load_program(loader), 0.05),
        model_name="llama-kv",
        tokenizer=tokenizer,
        max_concurrency=1,
        max_queue=1,
        queue_timeout=10,
    )
    with ServerThread(server, lifetime=LIFETIME) as url:
        yield url


def _health(url):
    return httpx.get(f"{url}/health").json()


def _wait_until(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_client_dropped_mid_stream_frees_its_slot(slow_server):
    body = {"prompt": "Once upon a time", "max_tokens": 120, "temperature": 0, "stream": True}
    with httpx.Client(timeout=30) as http, http.stream("POST", f"{slow_server}/v1/completions", json=body) as reply:
        lines = reply.iter_lines()
        assert sum(1 for line, _ in zip(lines, range(6)) if line.startswith("data:")) == 3
        assert _health(slow_server)["busy"] == 1
    # 120 tokens take 6 s; the dropped one stops at its next token and the next request gets the slot
    start = time.monotonic()
    _wait_until(lambda: _health(slow_server)["cancelled"] == 1, timeout=3)
    client = openai.OpenAI(base_url=f"{slow_server}/v1", api_key="unused", max_retries=0, timeout=30)
    reply = client.completions.create(model="llama-kv", prompt="Hello", max_tokens=3, temperature=0)
    assert reply.usage.completion_tokens == 3 and time.monotonic() - start < 3
    assert _health(slow_server)["busy"] == 0


def test_beyond_the_waiting_line_is_429(slow_server):
    body = {"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0}
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(httpx.post, f"{slow_server}/v1/completions", json=body, timeout=30)
        _wait_until(lambda: _health(slow_server)["busy"] == 1)
        second = pool.submit(httpx.post, f"{slow_server}/v1/completions", json=body, timeout=30)
        _wait_until(lambda: _health(slow_server)["waiting"] == 1)
        third = httpx.post(f"{slow_server}/v1/completions", json=body, timeout=30)
        assert third.status_code == 429 and third.headers["retry-after"] == "1"
        assert third.json()["error"]["code"] == "queue_full"
        assert first.result().status_code == second.result().status_code == 200
        assert first.result().json()["choices"][0]["text"] == second.result().json()["choices"][0]["text"]


# -- /v1/run: any program ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlp_server():
    with ServerThread(ModelServer.from_path(str(GOLDEN / "mlp.pte"), max_concurrency=2), lifetime=LIFETIME) as url:
        yield url


def test_run_equals_method_execute(mlp_server):
    inputs = [np.load(GOLDEN / "mlp.npz")["forward/0/in0"]]
    program = Runtime.get().load_program(str(GOLDEN / "mlp.pte"))
    want = program.load_method("forward").execute(inputs)

    as_json = httpx.post(f"{mlp_server}/v1/run", json={"inputs": [inputs[0].tolist()]}).json()
    assert as_json["method"] == "forward" and as_json["outputs"][0]["name"] == "output_0"
    got = np.asarray(as_json["outputs"][0]["data"], dtype=as_json["outputs"][0]["dtype"])
    np.testing.assert_array_equal(got, want[0])

    named = httpx.post(f"{mlp_server}/v1/run", json={"inputs": {"input_0": inputs[0].tolist()}}).json()
    assert named["outputs"] == as_json["outputs"]

    npy = io.BytesIO()
    np.save(npy, inputs[0])
    reply = httpx.post(
        f"{mlp_server}/v1/run?format=npz", content=npy.getvalue(), headers={"Content-Type": "application/x-npy"}
    )
    np.testing.assert_array_equal(np.load(io.BytesIO(reply.content))["output_0"], want[0])

    npz = io.BytesIO()
    np.savez(npz, input_0=inputs[0])
    reply = httpx.post(f"{mlp_server}/v1/run", content=npz.getvalue(), headers={"Accept": "application/x-npz"})
    np.testing.assert_array_equal(np.load(io.BytesIO(reply.content))["output_0"], want[0])


@pytest.mark.parametrize(
    "body, status, param, code",
    [
        ({"inputs": [[[1.0, 2.0]]]}, 400, "inputs[0]", "wrong_shape"),
        ({"inputs": []}, 400, "inputs", "wrong_input_count"),
        ({"inputs": [[[1, 2], [3]]]}, 400, "inputs[0]", "invalid_array"),
        ({"inputs": {"x": [1]}}, 400, "inputs.x", "invalid_value"),
        ({"method": "backward", "inputs": []}, 404, "method", "method_not_found"),
        ({}, 400, "inputs", "missing_required_parameter"),
    ],
)
def test_bad_run_requests_name_the_field(mlp_server, body, status, param, code):
    reply = httpx.post(f"{mlp_server}/v1/run", json=body)
    assert reply.status_code == status
    assert (reply.json()["error"]["param"], reply.json()["error"]["code"]) == (param, code)


def test_text_endpoints_refuse_a_plain_model(mlp_server):
    client = openai.OpenAI(base_url=f"{mlp_server}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="mlp", prompt="hi")
    assert caught.value.body["code"] == "model_not_text_generation" and "/v1/run" in caught.value.body["message"]


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


def test_torchedge_serve_command(llama_kv):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "torchedge.cli", "serve", str(llama_kv[0]), "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--max-concurrency", "2", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    timer = threading.Timer(LIFETIME, process.kill)
    timer.start()
    try:
        assert "with 2 slot(s)" in process.stdout.readline()
        url = f"http://127.0.0.1:{port}"

        def up():
            try:
                return httpx.get(f"{url}/health").status_code == 200
            except httpx.TransportError:
                return process.poll() is None and False

        _wait_until(up, timeout=60)
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
        reply = client.chat.completions.create(
            model="llama-kv", messages=[{"role": "user", "content": "Hi"}], max_tokens=5, temperature=0
        )
        assert reply.usage.completion_tokens == 5
    finally:
        timer.cancel()
        process.terminate()
        process.wait(timeout=30)


def test_serve_refuses_a_directory(tmp_path, capsys):
    from torchedge.cli.main import main

    assert main(["serve", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


# -- the chat page in a real browser -----------------------------------------------------------


def _chromium():
    import shutil

    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4: no port, no
    websocket package): ``send(method, session, **params)`` returns the result."""

    def __init__(self, executable: str, profile: Path):
        to_chrome, self._write = os.pipe()
        self._read, from_chrome = os.pipe()
        os.set_inheritable(to_chrome, True)
        os.set_inheritable(from_chrome, True)

        def place_pipes():  # Chromium reads commands on fd 3 and writes replies on fd 4
            r, w = os.dup(to_chrome), os.dup(from_chrome)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            close_fds=False, preexec_fn=place_pipes,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer, self._id = b"", 0

    def send(self, method: str, session: str | None = None, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._read, 1 << 16)
                assert chunk, "Chromium closed its pipe"
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                assert "error" not in reply, reply["error"]
                return reply["result"]

    def close(self):
        self.process.kill()
        self.process.wait(timeout=30)
        os.close(self._read)
        os.close(self._write)


READ_LOG = (
    "JSON.stringify([...document.querySelectorAll('.msg')]"
    ".map(d => [d.className, d.dataset.done || '', d.textContent]))"
)


@pytest.mark.skipif(_chromium() is None, reason="no headless Chromium on this machine")
def test_the_chat_page_streams_a_reply_in_chromium(server, client, tmp_path):
    """Headless Chromium opens /?prompt=Hello, which sends "Hello"; the reply streams into the page
    and ends equal to the API's answer to the same request (greedy, 64 tokens: the page's defaults)."""
    want = (
        client.chat.completions.create(
            model="llama-kv", messages=[{"role": "user", "content": "Hello"}], max_tokens=64, temperature=0
        )
        .choices[0]
        .message.content
    )
    browser = Browser(_chromium(), tmp_path / "profile")
    timer = threading.Timer(120, browser.process.kill)
    timer.start()
    try:
        target = browser.send("Target.createTarget", url=f"{server}/?prompt=Hello")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        deadline = time.monotonic() + 60
        while True:
            log = json.loads(
                browser.send("Runtime.evaluate", session, expression=READ_LOG, returnByValue=True)["result"]["value"]
            )
            if len(log) == 2 and log[1][1] == "true" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        timer.cancel()
        browser.close()
    assert log == [["msg user", "", "Hello"], ["msg assistant", "true", want]]
