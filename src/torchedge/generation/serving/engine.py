"""The serving engine: one load of a program's bytes, ``N`` slots, each with its own state.

A slot is a `Program` of its own over the one shared `DataLoader`: the constants are zero-copy
views onto the loader's bytes (so the weights are in memory once, whatever ``N``), while each
slot's methods have their own planned arenas, KV cache included. Loading the methods of one
`Program` several times would not do for KV-cache programs: methods that share mutable buffers
(``forward`` and ``decode`` of `torchedge export llama-kv`) share them across every load of the
program, so two conversations would write one cache.

A request holds one slot from its first token to its last; the slot's work runs on a thread of
the engine's own pool (one thread per slot), so slots run in parallel as far as the GIL lets
NumPy. Requests beyond the slots wait in a bounded queue (`SlotPool`).

Nothing here imports a web framework: `torchedge.generation.serving.app` puts HTTP on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from torchedge.errors import InputError, TorchEdgeError
from torchedge.generation.runner import TextGenerator

__all__ = ["Busy", "Completion", "GenerationParams", "Slot", "SlotPool", "generate_text", "load_slots"]


class Busy(TorchEdgeError):
    """No slot is free and the waiting line is full (``queue_full``) or the wait timed out (``queue_timeout``)."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class Cancelled(Exception):
    """Raised inside a generation whose client went away: it ends the generation early."""


@dataclass
class Slot:
    """One concurrent conversation's state: its own `Program` (over the shared bytes), its
    generator (None when the program is not a KV-cache LM), and the methods `/v1/run` loaded."""

    index: int
    program: object
    generator: TextGenerator | None
    methods: dict = field(default_factory=dict)

    def method(self, name: str):
        """The slot's loaded ``name`` (loaded on first use, then kept)."""
        if name not in self.methods:
            self.methods[name] = self.program.load_method(name)  # type: ignore[attr-defined]
        return self.methods[name]


def load_slots(program_factory: Callable[[], object], count: int) -> tuple[list[Slot], str | None]:
    """``count`` slots, each from a program ``program_factory()`` gives; and, when the program is
    not a KV-cache LM, why (the `TextGenerator`'s message) or None when it is one."""
    if count < 1:
        raise InputError(f"max_concurrency must be >= 1, got {count}")
    slots, why_not = [], None
    for index in range(count):
        program = program_factory()
        generator = None
        if why_not is None:
            try:
                generator = TextGenerator(program)
            except InputError as e:
                why_not = str(e)
        slots.append(Slot(index, program, generator))
    return slots, why_not


class SlotPool:
    """Free slots, a bounded line of requests waiting for one, and the threads slots run on.

    `acquire` returns a free slot at once; when there is none it waits, at most ``max_queue``
    requests at a time (one more: `Busy` ``queue_full``, HTTP 429) and at most ``queue_timeout``
    seconds (then `Busy` ``queue_timeout``, HTTP 503). `run` runs a function on the slot's
    thread and gives the slot back when the function has returned, never before: a cancelled
    request's slot is free once its generation has stopped.
    """

    def __init__(self, slots: Sequence[Slot], max_queue: int = 64, queue_timeout: float = 60.0):
        if max_queue < 0:
            raise InputError(f"max_queue must be >= 0, got {max_queue}")
        if not queue_timeout > 0:
            raise InputError(f"queue_timeout must be > 0 seconds, got {queue_timeout}")
        self.slots = list(slots)
        self.max_queue = max_queue
        self.queue_timeout = queue_timeout
        self._free: asyncio.Queue[Slot] | None = None  # made on the event loop's first use
        self._executor = ThreadPoolExecutor(max_workers=len(self.slots), thread_name_prefix="torchedge-slot")
        self.waiting = 0
        self.served = 0
        self.cancelled = 0

    @property
    def busy(self) -> int:
        return len(self.slots) - (self._free.qsize() if self._free is not None else len(self.slots))

    def _queue(self) -> asyncio.Queue[Slot]:
        if self._free is None:
            self._free = asyncio.Queue()
            for slot in self.slots:
                self._free.put_nowait(slot)
        return self._free

    async def acquire(self) -> Slot:
        free = self._queue()
        with contextlib.suppress(asyncio.QueueEmpty):
            return free.get_nowait()
        if self.waiting >= self.max_queue:
            raise Busy(
                f"all {len(self.slots)} slots are busy and {self.waiting} requests are already waiting "
                f"(--max-queue {self.max_queue}): retry later",
                "queue_full",
            )
        self.waiting += 1
        try:
            return await asyncio.wait_for(free.get(), self.queue_timeout)
        except asyncio.TimeoutError:
            raise Busy(
                f"no slot became free within {self.queue_timeout:g} s (--queue-timeout): retry later", "queue_timeout"
            ) from None
        finally:
            self.waiting -= 1

    def release(self, slot: Slot) -> None:
        self._queue().put_nowait(slot)

    async def run(self, slot: Slot, fn: Callable[[], object]):
        """``fn()`` on a slot thread; the slot goes back to the pool when ``fn`` returns or raises.

        A caller cancelled while ``fn`` runs stops waiting, but the slot stays taken until ``fn``
        is done (it should notice the cancellation itself, see `generate_text`'s ``cancel``)."""
        loop = asyncio.get_running_loop()
        done = self._executor.submit(fn)

        def give_back(_) -> None:
            with contextlib.suppress(RuntimeError):  # the event loop closed: the server is stopping
                loop.call_soon_threadsafe(self.release, slot)

        done.add_done_callback(give_back)
        return await asyncio.wrap_future(done)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class GenerationParams:
    """One request's generation settings, checked (`torchedge.generation.serving.protocol`)."""

    max_tokens: int | None  # None: until the cache is full
    temperature: float = 1.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass
class Completion:
    """What a generation produced: the text (stop strings cut off), the token counts, and why it stopped."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" (an end-of-sequence token or a stop string) or "length"


def generate_text(
    generator: TextGenerator,
    tokenizer,
    prompt_ids: list[int],
    params: GenerationParams,
    stop_tokens: Sequence[int],
    emit: Callable[[str], object] = lambda text: None,
    cancel: threading.Event | None = None,
) -> Completion:
    """Generate on one slot (call it on the slot's thread): ``emit(text)`` receives the text as it
    becomes safe to send (stop strings held back and cut). Setting ``cancel`` stops the
    generation at the next token (`Cancelled` is raised)."""
    if params.max_tokens is None:
        raise InputError("generate_text needs max_tokens (the server fills it in)")

    def check(token: int) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled

    result = generator.generate(
        prompt_ids,
        params.max_tokens,
        temperature=params.temperature,
        top_k=params.top_k,
        top_p=params.top_p,
        seed=params.seed,
        stop_tokens=stop_tokens,
        callback=check,
        tokenizer=tokenizer,
        stop_strings=params.stop,
        on_text=emit,
    )
    finish = "stop" if result.stopped_by in ("stop_token", "stop_string") else "length"
    assert result.text is not None  # on_text is given, so the runner decoded the tokens
    return Completion(result.text, result.prompt_tokens, len(result.tokens), finish)
