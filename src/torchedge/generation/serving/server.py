"""Running the app: uvicorn in this process (`serve`), or in a thread for tests and benchmarks
(`ServerThread`, which stops by itself after a bounded lifetime)."""

from __future__ import annotations

import socket
import threading
import time

from torchedge.errors import TorchEdgeError

__all__ = ["ServerThread", "serve"]


def _uvicorn():
    try:
        import uvicorn
    except ImportError:
        raise TorchEdgeError("torchedge serve needs uvicorn and starlette: pip install 'torchedge[serve]'") from None
    return uvicorn


def _config(server, host: str, port: int, log_level: str):
    from torchedge.generation.serving.app import create_app

    # h11 and asyncio: pure Python, the same everywhere (no uvloop/httptools needed)
    return _uvicorn().Config(
        create_app(server),
        host=host,
        port=port,
        log_level=log_level,
        http="h11",
        loop="asyncio",
        lifespan="off",
        timeout_graceful_shutdown=5,  # streams still open then are cut
    )


def serve(server, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Serve ``server`` (a `ModelServer`) until interrupted (Ctrl-C, SIGTERM)."""
    uvicorn = _uvicorn()
    try:
        uvicorn.Server(_config(server, host, port, log_level)).run()
    finally:
        server.close()


class ServerThread:
    """``server`` on 127.0.0.1 and a free port, in a daemon thread: ``with ServerThread(s) as url: ...``.

    It stops when the block ends, or by itself after ``lifetime`` seconds whatever happens.
    """

    def __init__(self, server, lifetime: float = 600.0, log_level: str = "warning"):
        self.server = server
        self.lifetime = lifetime
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say so (protocol 0 does
        # not), and without it every keep-alive reply in two writes waits 40 ms for a delayed ACK
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))  # the port is ours before uvicorn starts: no race
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._uvicorn = _uvicorn().Server(_config(server, "127.0.0.1", self.port, log_level))
        self._thread = threading.Thread(target=self._run, name="torchedge-serve", daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    def _run(self) -> None:
        self._uvicorn.run(sockets=[self._socket])

    def start(self) -> str:
        self._thread.start()
        self._timer.start()
        deadline = time.monotonic() + 30
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise TorchEdgeError("the server thread did not start")
            time.sleep(0.02)
        return self.url

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        self._timer.cancel()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)
        self.server.close()
        self._socket.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
