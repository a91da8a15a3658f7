"""What the `torchedge serve` tests share: the tiny Llama, the reference answers, servers to test.

Every server listens on 127.0.0.1 and a port of its own, in a thread or a process that stops
when its test ends or, whatever happens, after `LIFETIME` seconds.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from torchedge.generation import ChatTemplate, TextGenerator, Tokenizer
from torchedge.generation.serving.engine import GenerationParams, generate_text
from torchedge.runtime import Runtime

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
LIFETIME = 240  # seconds: a server stops by itself then, whatever the test does
PROMPTS = ["Once upon a time", "Hello", "The quick brown fox jumps over the lazy dog. " * 3, "It read one token"]
_EXPORTED: dict[str, tuple[Path, Path]] = {}


def export_llama_kv(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny Llama with a KV cache and its tokenizer, as `torchedge export llama-kv` writes
    them; exported once per test process, whichever test module asks first."""
    if "llama-kv" not in _EXPORTED:
        from torchedge.cli.main import main

        pte = tmp_path_factory.mktemp("serve") / "llama-kv.pte"
        if main(["export", "llama-kv", "-o", str(pte)]) != 0:
            raise RuntimeError("torchedge export llama-kv failed")
        _EXPORTED["llama-kv"] = pte, pte.with_name("llama-kv.tokenizer.json")
    return _EXPORTED["llama-kv"]


class Reference:
    """What a prompt gives on a generator of its own (no server, nothing else running): the
    reference for every answer. Calls return a `Completion`; repeated requests are computed once."""

    def __init__(self, pte: Path, tokenizer: Tokenizer):
        self.generator = TextGenerator(Runtime.get().load_program(str(pte)))
        self.tokenizer = tokenizer
        self._done: dict = {}

    def __call__(self, ids, max_tokens, stop_strings=(), **sampling):
        key = (tuple(ids), max_tokens, tuple(stop_strings), tuple(sorted(sampling.items())))
        if key not in self._done:
            params = GenerationParams(max_tokens, stop=tuple(stop_strings), **{"temperature": 0.0, **sampling})
            self._done[key] = generate_text(self.generator, self.tokenizer, list(ids), params, self.generator.eos_ids)
        return self._done[key]

    def chat_ids(self, messages) -> list[int]:
        """The prompt of a chat request: the default template's text, encoded as the server does."""
        text = ChatTemplate().render(messages, "<s>", "</s>")
        return self.tokenizer.encode(text, add_special_tokens=False)


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


def health(url: str) -> dict:
    return httpx.get(f"{url}/health").json()


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class ServeProcess:
    """``torchedge serve PTE OPTIONS`` in a process of its own on a free loopback port:
    ``with ServeProcess(pte, "--max-concurrency", "2") as server: server.url, server.pid``."""

    def __init__(self, pte: Path, *options: str):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "torchedge.cli", "serve", str(pte), "--port", str(port)]
        self.process = subprocess.Popen(
            [*command, "--log-level", "warning", *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.pid = self.process.pid
        self._timer = threading.Timer(LIFETIME, self.process.kill)

    def __enter__(self) -> ServeProcess:
        self._timer.start()
        self.banner = self.process.stdout.readline()  # type: ignore[union-attr]

        def up() -> bool:
            assert self.process.poll() is None, f"torchedge serve exited: {self.banner}"
            try:
                return httpx.get(f"{self.url}/health").status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_until(up, timeout=60)
        except BaseException:
            self.__exit__()
            raise
        return self

    def rss_bytes(self) -> int:
        """The server process's resident memory (VmRSS in /proc/PID/status)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line")

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        self.process.terminate()
        self.process.wait(timeout=30)
