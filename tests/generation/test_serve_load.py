"""`torchedge serve` under load: many clients at once, clients that leave, a full waiting line.

Every answer is compared with what its request gives alone, on a generator of its own
(`serve_support.Reference`).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

from tests.generation.serve_support import (  # noqa: E402
    LIFETIME,
    PROMPTS,
    Reference,
    ServeProcess,
    SlowProgram,
    health,
    wait_until,
)
from torchedge.generation.serving.app import ModelServer  # noqa: E402
from torchedge.generation.serving.server import ServerThread  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.runtime.data_loader import loader_for  # noqa: E402

LOAD_PROMPTS = [*PROMPTS, "It read one token at a time and remembered every one of them. " * 6]
CLIENTS, REQUESTS, SLOTS = 16, 8, 4
RSS_GROWTH_LIMIT = 32 << 20


@pytest.fixture(scope="module")
def reference(llama_kv, tokenizer):
    return Reference(llama_kv[0], tokenizer)


def _jobs(requests: int) -> list[list[dict]]:
    """Per client, its requests: chat or completion, five prompt lengths (2 to 115 tokens, some
    reaching the end of the cache), streamed or not, greedy or seeded; every 16th a stream the
    client drops after its first text."""
    clients = []
    for c in range(CLIENTS):
        jobs = []
        for r in range(requests):
            n = c * requests + r
            jobs.append(
                {
                    "kind": "chat" if n % 3 == 0 else "completion",
                    "prompt": LOAD_PROMPTS[n % len(LOAD_PROMPTS)],
                    "max_tokens": 8 + 5 * (n % 4),
                    "stream": n % 2 == 0,
                    "sampling": {"temperature": 0} if n % 4 < 2 else {"temperature": 0.8, "seed": n},
                    "drop": n % 16 == 5,
                }
            )
        clients.append(jobs)
    return clients


def _drop_mid_stream(url: str, job: dict) -> None:
    """Start a long streamed completion, read its first text, then hang up."""
    body = {"prompt": job["prompt"], "max_tokens": 100, "temperature": 0, "stream": True}
    with httpx.Client(timeout=60) as http, http.stream("POST", f"{url}/v1/completions", json=body) as reply:
        assert reply.status_code == 200
        next(line for line in reply.iter_lines() if '"text": "' in line and '"text": ""' not in line)


def _ask(client, job: dict) -> tuple[str, str]:
    """One request: (text, finish_reason)."""
    common = dict(model="llama-kv", max_tokens=job["max_tokens"], stream=job["stream"], **job["sampling"])
    if job["kind"] == "chat":
        reply = client.chat.completions.create(messages=[{"role": "user", "content": job["prompt"]}], **common)
        if job["stream"]:
            chunks = list(reply)
            return "".join(c.choices[0].delta.content or "" for c in chunks), chunks[-1].choices[0].finish_reason
        return reply.choices[0].message.content, reply.choices[0].finish_reason
    reply = client.completions.create(prompt=job["prompt"], **common)
    if job["stream"]:
        chunks = list(reply)
        return "".join(c.choices[0].text for c in chunks), chunks[-1].choices[0].finish_reason
    return reply.choices[0].text, reply.choices[0].finish_reason


def _round(url: str, clients: list[list[dict]]) -> list[list]:
    """Every client in a thread of its own, its requests one after the other; what each got."""

    def one_client(jobs: list[dict]) -> list:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        got = []
        for job in jobs:
            if job["drop"]:
                got.append(_drop_mid_stream(url, job))
            else:
                got.append(_ask(client, job))
        return got

    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(one_client, clients))


def _expected(reference: Reference, job: dict) -> tuple[str, str]:
    if job["kind"] == "chat":
        ids = reference.chat_ids([{"role": "user", "content": job["prompt"]}])
    else:
        ids = reference.tokenizer.encode(job["prompt"])
    want = reference(ids, job["max_tokens"], **job["sampling"])
    return want.text, want.finish_reason


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the server's RSS in /proc/PID/status")
def test_16_clients_x_8_requests_each_get_what_they_get_alone(llama_kv, reference):
    """16 clients x 8 requests on 4 slots of a `torchedge serve` process: every answer equals
    the request's alone, none is lost, the clients that hang up mid-stream neither stall the
    others nor keep their slot, and the server's memory stays flat.

    Memory: the server's RSS is read after a warm-up round (16 clients x 1 request, every kind
    of request, a hang-up included: the allocator's pools, NumPy's and the slots' buffers are
    then at their working size) and again after the 128 requests. Steady serving moves it by a
    few MiB of allocator slack, on any machine; the bound, 32 MiB, is far above that and far
    below what state kept per request would add: a slot's program, arenas and KV cache are about
    1 MiB, so keeping even a quarter of that per request passes 32 MiB over 128 requests.
    """
    warm_up, run = _jobs(1), _jobs(REQUESTS)
    with ServeProcess(llama_kv[0], "--max-concurrency", str(SLOTS)) as server:
        _round(server.url, warm_up)
        before = server.rss_bytes()
        results = _round(server.url, run)
        after = server.rss_bytes()
        total = sum(len(jobs) for jobs in warm_up + run)
        wait_until(lambda: health(server.url)["served"] + health(server.url)["cancelled"] == total)
        state = health(server.url)
    dropped = sum(job["drop"] for jobs in warm_up + run for job in jobs)
    assert dropped == 9 and 0 <= state["cancelled"] <= dropped
    assert (state["busy"], state["waiting"]) == (0, 0)
    assert [len(got) for got in results] == [REQUESTS] * CLIENTS  # none lost
    for jobs, got in zip(run, results):
        for job, answer in zip(jobs, got):
            if not job["drop"]:
                assert answer == _expected(reference, job), job
    assert after - before < RSS_GROWTH_LIMIT, f"the server's RSS grew by {(after - before) >> 20} MiB"


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


def test_a_client_dropped_mid_stream_frees_its_slot(slow_server):
    body = {"prompt": "Once upon a time", "max_tokens": 120, "temperature": 0, "stream": True}
    with httpx.Client(timeout=30) as http, http.stream("POST", f"{slow_server}/v1/completions", json=body) as reply:
        lines = reply.iter_lines()
        assert sum(1 for line, _ in zip(lines, range(6)) if line.startswith("data:")) == 3
        assert health(slow_server)["busy"] == 1
    # 120 tokens take 6 s; the dropped one stops at its next token and the next request gets the slot
    wait_until(lambda: health(slow_server)["cancelled"] == 1, timeout=3)
    client = openai.OpenAI(base_url=f"{slow_server}/v1", api_key="unused", max_retries=0, timeout=30)
    reply = client.completions.create(model="llama-kv", prompt="Hello", max_tokens=3, temperature=0)
    assert reply.usage.completion_tokens == 3
    assert health(slow_server)["busy"] == 0


def test_a_client_gone_before_its_unstreamed_reply_frees_its_slot(slow_server):
    body = {"prompt": "Once upon a time", "max_tokens": 120, "temperature": 0}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{slow_server}/v1/completions", json=body, timeout=1)
    wait_until(lambda: health(slow_server)["cancelled"] == 1, timeout=3)
    assert health(slow_server)["busy"] == 0


def test_beyond_the_waiting_line_is_429(slow_server):
    body = {"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0}
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(httpx.post, f"{slow_server}/v1/completions", json=body, timeout=30)
        wait_until(lambda: health(slow_server)["busy"] == 1)
        second = pool.submit(httpx.post, f"{slow_server}/v1/completions", json=body, timeout=30)
        wait_until(lambda: health(slow_server)["waiting"] == 1)
        third = httpx.post(f"{slow_server}/v1/completions", json=body, timeout=30)
        assert third.status_code == 429 and third.headers["retry-after"] == "1"
        assert third.json()["error"]["code"] == "queue_full"
        assert first.result().status_code == second.result().status_code == 200
        assert first.result().json()["choices"][0]["text"] == second.result().json()["choices"][0]["text"]
