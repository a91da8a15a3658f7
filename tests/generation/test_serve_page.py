"""The chat page at ``/`` in a real browser: headless Chromium types a message into the page,
sends it, and the reply streams in.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: fds 3 and
4, so no port and no websocket package). The test is skipped where no Chromium is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from tests.generation.serve_support import LIFETIME, Reference, SlowProgram, export_llama_kv  # noqa: E402
from torchedge.generation import Tokenizer  # noqa: E402
from torchedge.generation.serving.app import ModelServer  # noqa: E402
from torchedge.generation.serving.server import ServerThread  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.runtime.data_loader import loader_for  # noqa: E402

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


class Browser:
    """Headless Chromium over the DevTools protocol: ``send(method, session, **params)`` returns
    the command's result."""

    def __init__(self, executable: str, profile: Path):
        to_chrome, self._write = os.pipe()
        self._read, from_chrome = os.pipe()

        def place_pipes():  # Chromium reads commands on fd 3 and writes replies on fd 4
            r, w = os.dup(to_chrome), os.dup(from_chrome)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.process = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            close_fds=False, preexec_fn=place_pipes,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer, self._id = b"", 0
        self._timer = threading.Timer(120, self.process.kill)  # whatever happens, it goes
        self._timer.start()

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
        self._timer.cancel()
        self.process.kill()
        self.process.wait(timeout=30)
        os.close(self._read)
        os.close(self._write)


class Page:
    """One tab: evaluate JavaScript, click, type."""

    def __init__(self, browser: Browser, url: str):
        self.browser = browser
        target = browser.send("Target.createTarget", url=url)["targetId"]
        self.session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def js(self, expression: str):
        result = self.browser.send("Runtime.evaluate", self.session, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while not (value := self.js(expression)):
            assert time.monotonic() < deadline, f"timed out waiting for {expression}"
            time.sleep(0.05)
        return value

    def click(self, selector: str) -> None:
        """A left click at the middle of the element, as a mouse makes it."""
        box = self.js(f"(r => [r.x + r.width / 2, r.y + r.height / 2])(document.querySelector('{selector}')"
                      ".getBoundingClientRect())")  # fmt: skip
        for kind in ("mousePressed", "mouseReleased"):
            self.browser.send(
                "Input.dispatchMouseEvent", self.session, type=kind, x=box[0], y=box[1], button="left", clickCount=1
            )

    def type(self, text: str) -> None:
        """Key presses into the focused element, one character at a time."""
        for char in text:
            for kind in ("keyDown", "keyUp"):
                self.browser.send("Input.dispatchKeyEvent", self.session, type=kind, key=char, text=char)


# Every text the reply's element shows, in order, recorded as the page changes it.
WATCH_REPLY = """
window.seen = [];
new MutationObserver(() => {
  const reply = document.querySelector('.msg.assistant');
  if (reply && reply.textContent !== window.seen[window.seen.length - 1]) window.seen.push(reply.textContent);
}).observe(document.getElementById('log'), {childList: true, subtree: true, characterData: true});
true
"""
READ_LOG = "[...document.querySelectorAll('.msg')].map(d => [d.className, d.dataset.done || '', d.textContent])"


@pytest.fixture
def slow_server(tmp_path_factory):
    """The tiny Llama at 50 ms a model call: its reply streams over a few seconds."""
    pytest.importorskip("transformers")
    pte, tokenizer_path = export_llama_kv(tmp_path_factory)
    tokenizer = Tokenizer.from_file(tokenizer_path)
    loader = loader_for(str(pte))
    server = ModelServer(
        lambda: SlowProgram(Runtime.get().load_program(loader), 0.05), model_name="llama-kv", tokenizer=tokenizer
    )
    with ServerThread(server, lifetime=LIFETIME) as url:
        yield url, Reference(pte, tokenizer)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt install chromium)")
def test_the_chat_page_streams_a_reply_in_chromium(slow_server, tmp_path):
    """Type "Hello" into the page and click Send: the reply grows piece by piece in the page and
    ends equal to what the request gives alone (greedy, 64 tokens: the page's settings)."""
    url, reference = slow_server
    want = reference(reference.chat_ids([{"role": "user", "content": "Hello"}]), 64).text
    browser = Browser(CHROMIUM, tmp_path / "profile")  # type: ignore[arg-type]
    try:
        page = Page(browser, f"{url}/")
        page.wait_for("document.readyState === 'complete' && document.getElementById('send') !== null")
        assert page.js("document.getElementById('model').textContent") == "llama-kv"
        page.js(WATCH_REPLY)
        page.click("#prompt")
        page.type("Hello")
        assert page.js("document.getElementById('prompt').value") == "Hello"
        page.click("#send")
        page.wait_for("document.querySelector('.msg.assistant[data-done]') !== null")
        log, seen = page.js(READ_LOG), page.js("window.seen")
        sending_again = page.js("!document.getElementById('send').disabled && !document.getElementById('prompt').value")
    finally:
        browser.close()
    assert log == [["msg user", "", "Hello"], ["msg assistant", "true", want]]
    pieces = [text for text in seen if text]
    assert all(want.startswith(text) for text in pieces) and pieces[-1] == want
    assert len(pieces) > 1, "the reply appeared at once, not streamed"
    assert sending_again
