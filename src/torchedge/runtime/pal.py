"""The platform abstraction layer (PAL): the hooks of ExecuTorch's ``et_pal_*`` functions that make
sense in Python, replaceable by the application that embeds the runtime.

* the clock (`set_clock`): a function returning nanoseconds as an ``int`` (ExecuTorch's
  ``et_pal_current_ticks``); the event tracer times every event with it. Default:
  `time.perf_counter_ns`. A fake clock makes ETDump timestamps deterministic.
* the log sink (`set_log_sink`): ``sink(level, message)`` with a `logging` level
  (ExecuTorch's ``et_pal_emit_log_message``); the runtime logs program and method loads
  (``DEBUG``) and failed runs (``ERROR``). Default: the ``torchedge.runtime`` logger.
* the abort handler (`set_abort_handler`): ``handler(message)``, called where ExecuTorch
  calls ``et_pal_abort``: a broken invariant inside the runtime (an `InternalError` during a
  run). ExecuTorch's default ends the process; torchedge's raises `InternalError`, and
  when a handler returns, the runtime raises it anyway: a run never continues past a broken
  invariant.

Each setter returns the hook it replaced; ``None`` restores the default. The hooks are
process-wide, as ExecuTorch's are.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from torchedge.errors import InternalError, KernelError, TorchEdgeError

__all__ = ["set_clock", "set_log_sink", "set_abort_handler", "now_ns", "log", "abort", "run_failure"]

Clock = Callable[[], int]
LogSink = Callable[[int, str], None]
AbortHandler = Callable[[str], None]

_LOGGER = logging.getLogger("torchedge.runtime")


def _default_sink(level: int, message: str) -> None:
    _LOGGER.log(level, message)


def _default_abort(message: str) -> None:
    raise InternalError(message)


_clock: Clock = time.perf_counter_ns
_sink: LogSink = _default_sink
_abort: AbortHandler = _default_abort


def _callable_or_none(fn, what: str) -> None:
    if fn is not None and not callable(fn):
        raise TypeError(f"{what} must be callable or None, got {type(fn).__name__}")


def set_clock(clock: Clock | None) -> Clock:
    """Time events with ``clock()`` (nanoseconds, an int); returns the previous clock."""
    global _clock
    _callable_or_none(clock, "the clock")
    previous, _clock = _clock, clock or time.perf_counter_ns
    return previous


def set_log_sink(sink: LogSink | None) -> LogSink:
    """Send the runtime's log messages to ``sink(level, message)``; returns the previous sink."""
    global _sink
    _callable_or_none(sink, "the log sink")
    previous, _sink = _sink, sink or _default_sink
    return previous


def set_abort_handler(handler: AbortHandler | None) -> AbortHandler:
    """Call ``handler(message)`` on a broken runtime invariant; returns the previous handler."""
    global _abort
    _callable_or_none(handler, "the abort handler")
    previous, _abort = _abort, handler or _default_abort
    return previous


def now_ns() -> int:
    """The current time of the PAL clock, in nanoseconds."""
    return _clock()


def log(level: int, message: str) -> None:
    """Emit a message through the log sink. A sink that raises never breaks the runtime."""
    try:
        _sink(level, message)
    except Exception:  # logging must never change what the runtime does
        pass


def abort(message: str) -> None:
    """Call the abort handler; if it returns, raise `InternalError` anyway."""
    _abort(message)
    raise InternalError(message)


def run_failure(method: str, pc: int, label: str, error: Exception, describe_args: Callable[[], str]) -> Exception:
    """The error a failed instruction of a run raises (naming the method, instruction and operator),
    logged through the sink; a broken invariant (`InternalError`) goes to the abort handler first."""
    where = f"method '{method}', instruction {pc} ({label})"
    if isinstance(error, InternalError):
        log(logging.ERROR, f"{where}: aborting: {error}")
        abort(f"{where}: {error}")
    if isinstance(error, TorchEdgeError):
        failure: Exception = type(error)(f"{where}: {error}")
    else:
        failure = KernelError(f"{where} failed on arguments {describe_args()}: {type(error).__name__}: {error}")
    log(logging.ERROR, f"execute failed: {failure}")
    return failure
