"""`torchedge serve` under load: throughput and latency at 1, 4 and 16 concurrent clients.

Usage: python benchmarks/serving.py [--model llama-kv] [--clients 1,4,16] [--requests 8] [--new 32]
                                    [--rounds N] [--pte PATH] [--json PATH]

The server runs as `torchedge serve` in a process of its own (its GIL is not the clients'), with
as many slots as clients (``--max-concurrency C``: one KV cache and one thread per client, one
runtime thread per method). Each client, a thread here, sends ``--requests`` streamed completions
one after the other (prompts of mixed lengths, greedy, ``--new`` tokens at most) and records when
each chunk arrives. Reported per level: completion tokens/s across all clients, time to first
token and time per token after it (percentiles over requests). Then llama.cpp-style use, one
stream at a time, through the server against the loop `torchedge generate` runs (`TextGenerator`
in this process, no HTTP), the two in turn for ``--rounds`` rounds: tokens/s, time to first
token and per token (medians), the cost of the server for a single user.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (pins native thread pools to one thread)
import httpx  # noqa: E402

PROMPTS = [
    "Once upon a time",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog. It read one token at a time and remembered every one.",
    "It read",
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else float("nan")


def build(model: str, directory: str) -> str:
    from torchedge.cli.main import main

    pte = os.path.join(directory, f"{model}.pte")
    assert main(["export", model, "-o", pte]) == 0
    return pte


class Server:
    """`torchedge serve PTE --max-concurrency C` on a free port, stopped on exit."""

    def __init__(self, pte: str, slots: int):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        command = [sys.executable, "-m", "torchedge.cli", "serve", pte, "--port", str(self.port)]
        command += ["--max-concurrency", str(slots), "--max-queue", "256", "--log-level", "warning"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"torchedge serve exited: {self.process.stderr.read()}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{self.url}/health").status_code == 200:
                    return self.url
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("torchedge serve did not start within 120 s")

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def stream_one(http: httpx.Client, url: str, prompt: str, new: int) -> dict:
    """One streamed completion: when it was sent, when each text chunk came, the tokens it made."""
    body = {"prompt": prompt, "max_tokens": new, "temperature": 0, "stream": True}
    body["stream_options"] = {"include_usage": True}
    start = time.perf_counter()
    arrivals, tokens = [], 0
    with http.stream("POST", f"{url}/v1/completions", json=body) as reply:
        reply.raise_for_status()
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            elif chunk["choices"] and chunk["choices"][0]["text"]:
                arrivals.append(time.perf_counter())
    return {"start": start, "arrivals": arrivals, "tokens": tokens, "end": time.perf_counter()}


def load_level(pte: str, clients: int, requests: int, new: int) -> dict:
    with Server(pte, clients) as url:
        with httpx.Client(timeout=300) as warm:  # the first request of each slot loads nothing more, but warms caches
            stream_one(warm, url, PROMPTS[0], 4)
        results: list[dict] = []
        lock = threading.Lock()

        def client(c: int) -> None:
            with httpx.Client(timeout=300) as http:
                for r in range(requests):
                    result = stream_one(http, url, PROMPTS[(c + r) % len(PROMPTS)], new)
                    with lock:
                        results.append(result)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
    ttft = [(r["arrivals"][0] - r["start"]) * 1e3 for r in results if r["arrivals"]]
    per_token = [  # the tokens after the first, over the time between the first and the last text
        (r["arrivals"][-1] - r["arrivals"][0]) * 1e3 / (r["tokens"] - 1)
        for r in results
        if len(r["arrivals"]) > 1 and r["tokens"] > 1
    ]
    tokens = sum(r["tokens"] for r in results)
    return {
        "clients": clients,
        "requests": len(results),
        "tokens": tokens,
        "wall": wall,
        "tokens_per_second": tokens / wall,
        "ttft": ttft,
        "per_token": per_token,
    }


def _timings(start: float, arrivals: list[float], tokens: int, end: float) -> tuple[float, float, float]:
    """(tokens/s, time to first token ms, ms per token after it) of one request."""
    per_token = (arrivals[-1] - arrivals[0]) * 1e3 / (tokens - 1) if len(arrivals) > 1 and tokens > 1 else math.nan
    return tokens / (end - start), (arrivals[0] - start) * 1e3 if arrivals else math.nan, per_token


def _generate_once(generator, tokenizer, ids: list[int], new: int) -> tuple[float, float, float]:
    """`_timings` of one generation, its text decoded as it comes (as `torchedge generate` prints it)."""
    stream, arrivals = tokenizer.stream(), []

    def on_token(token: int) -> None:
        if stream.push(token):
            arrivals.append(time.perf_counter())

    start = time.perf_counter()
    result = generator.generate(ids, new, stop_tokens=[], callback=on_token)
    return _timings(start, arrivals, len(result.tokens), time.perf_counter())


def single_stream(pte: str, new: int, rounds: int) -> list[list]:
    """One request at a time, llama.cpp style: through the server (streamed, one client) against
    the loop `torchedge generate` runs (`TextGenerator` in this process, text decoded as it goes),
    the two in turn each round; the last column is the median of the rounds' ratios."""
    from torchedge.generation import TextGenerator, Tokenizer
    from torchedge.runtime import Runtime

    tokenizer = Tokenizer.from_file(pte.removesuffix(".pte") + ".tokenizer.json")
    generator = TextGenerator(Runtime.get().load_program(pte))
    ids = tokenizer.encode(PROMPTS[0])
    runner, served = [], []
    with Server(pte, 1) as url, httpx.Client(timeout=300) as http:
        stream_one(http, url, PROMPTS[0], 4)
        _generate_once(generator, tokenizer, ids, new)
        for _ in range(rounds):
            runner.append(_generate_once(generator, tokenizer, ids, new))
            r = stream_one(http, url, PROMPTS[0], new)
            served.append(_timings(r["start"], r["arrivals"], r["tokens"], r["end"]))
    ratio = statistics.median(a[0] / b[0] for a, b in zip(runner, served))
    rows = []
    for side, samples, slower in (
        ("TextGenerator (as torchedge generate)", runner, 1.0),
        ("torchedge serve, 1 client", served, ratio),
    ):
        rate, ttft, per_token = (statistics.median(s[i] for s in samples) for i in range(3))
        rows.append([side, f"{rate:.0f}", f"{ttft:.1f}", f"{per_token:.2f}", f"{slower:.2f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="llama-kv", help="a built-in KV-cache LM (default: llama-kv)")
    parser.add_argument("--pte", help="serve this .pte (its <stem>.tokenizer.json beside it) instead of exporting")
    parser.add_argument("--clients", default="1,4,16", help="concurrent clients per level (default: 1,4,16)")
    parser.add_argument("--requests", type=int, default=8, help="streamed requests per client (default: 8)")
    parser.add_argument("--new", type=int, default=32, help="new tokens per request at most (default: 32)")
    parser.add_argument("--rounds", type=int, default=15, help="single-stream rounds (default: 15)")
    _common.add_json_option(parser)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        pte = args.pte or build(args.model, directory)
        headers = ["clients", "requests", "tokens", "tokens/s", "TTFT p50 ms", "TTFT p90 ms", "TTFT p99 ms"]
        headers += ["per-token p50 ms", "per-token p90 ms", "per-token p99 ms"]
        rows = []
        for clients in (int(c) for c in args.clients.split(",")):
            level = load_level(pte, clients, args.requests, args.new)
            row = [clients, level["requests"], level["tokens"], f"{level['tokens_per_second']:.0f}"]
            row += [f"{percentile(level['ttft'], q):.1f}" for q in (50, 90, 99)]
            row += [f"{percentile(level['per_token'], q):.2f}" for q in (50, 90, 99)]
            rows.append(row)
        _common.print_table(headers, rows)
        print()
        single_headers = ["side", "tokens/s", "TTFT ms", "per-token ms", "time over TextGenerator's"]
        single = single_stream(pte, args.new, args.rounds)
        _common.print_table(single_headers, single)
    _common.write_json(args.json, {"load": (headers, rows), "single stream": (single_headers, single)})


if __name__ == "__main__":
    main()
