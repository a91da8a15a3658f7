"""The platform abstraction layer: the clock, log sink and abort handler an application replaces."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import numpy as np
import pytest

from torchedge.errors import InternalError, KernelError, OperatorMissingError
from torchedge.runtime import Runtime, pal
from torchedge.runtime.steps import KERNEL, Step
from torchedge.serialize.etdump import deserialize_etdump

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.fixture
def hooks():
    """Restores the default hooks after a test replaces them."""
    yield
    pal.set_clock(None)
    pal.set_log_sink(None)
    pal.set_abort_handler(None)


def _mlp_input() -> np.ndarray:
    return np.load(GOLDEN / "mlp.npz")["forward/0/in0"]


def _etdump_with_fake_clock(tmp_path: Path, name: str) -> bytes:
    ticks = itertools.count(1000, 10)
    pal.set_clock(lambda: next(ticks))
    program = Runtime.get().load_program(GOLDEN / "mlp.pte", enable_etdump=True)
    method = program.load_method()
    for _ in range(2):
        method.execute([_mlp_input()])
    path = tmp_path / name
    program.write_etdump_result_to_file(path)
    return path.read_bytes()


def test_a_fake_clock_makes_etdump_timestamps_deterministic(tmp_path, hooks):
    first = _etdump_with_fake_clock(tmp_path, "a.etdp")
    second = _etdump_with_fake_clock(tmp_path, "b.etdp")
    assert first == second
    times = [
        t
        for run in deserialize_etdump(first).run_data
        for event in run.events
        if event.profile_event is not None
        for t in (event.profile_event.start_time, event.profile_event.end_time)
    ]
    assert times and all(t >= 1000 and (t - 1000) % 10 == 0 for t in times)


def test_set_clock_returns_the_previous_and_none_restores_the_default(hooks):
    fake = lambda: 7  # noqa: E731
    pal.set_clock(fake)
    assert pal.now_ns() == 7
    assert pal.set_clock(None) is fake
    assert pal.now_ns() > 7
    with pytest.raises(TypeError):
        pal.set_clock(3)  # type: ignore[arg-type]


def test_a_log_sink_captures_loads_and_failed_runs(hooks):
    messages: list[tuple[int, str]] = []
    pal.set_log_sink(lambda level, message: messages.append((level, message)))
    method = Runtime.get().load_program(GOLDEN / "mlp.pte").load_method()
    assert any("loaded a program" in m for _, m in messages)
    assert any("loaded method 'forward'" in m for _, m in messages)
    pc = _break_first_kernel(method, ValueError("bad"))
    with pytest.raises(KernelError, match=f"instruction {pc}"):
        method.execute([_mlp_input()])
    errors = [m for level, m in messages if level == logging.ERROR]
    assert len(errors) == 1 and "execute failed" in errors[0] and "bad" in errors[0]


def test_the_default_sink_is_the_torchedge_runtime_logger(caplog, hooks):
    with caplog.at_level(logging.DEBUG, logger="torchedge.runtime"):
        Runtime.get().load_program(GOLDEN / "mlp.pte")
    assert any("loaded a program" in r.getMessage() for r in caplog.records)


def test_a_sink_that_raises_does_not_break_the_runtime(hooks):
    pal.set_log_sink(_raise(RuntimeError("sink down")))
    Runtime.get().load_program(GOLDEN / "mlp.pte").load_method().execute([_mlp_input()])


def _break_first_kernel(method, error: Exception) -> int:
    """Make the first kernel step that runs (steps reading only constants ran at load) raise ``error``."""
    pc, step = next((pc, s) for pc, s in enumerate(method._steps) if s.kind == KERNEL)
    method._steps[pc] = Step(step.kind, _raise(error), step.args, step.ret, step.label)
    method._steps_without_resizing = method._steps
    return pc


def _raise(error: Exception):
    def fn(*args):
        raise error

    return fn


def test_a_custom_abort_handler_is_called_on_a_broken_invariant(hooks):
    aborted: list[str] = []
    pal.set_abort_handler(aborted.append)
    method = Runtime.get().load_program(GOLDEN / "mlp.pte").load_method()
    pc = _break_first_kernel(method, InternalError("arena moved"))
    # A handler that returns does not let the run go on: the runtime raises anyway.
    with pytest.raises(InternalError, match="arena moved"):
        method.execute([_mlp_input()])
    assert len(aborted) == 1 and f"instruction {pc}" in aborted[0] and "arena moved" in aborted[0]


def test_the_default_abort_handler_raises(hooks):
    with pytest.raises(InternalError, match="broken"):
        pal.abort("broken")


def test_ordinary_errors_do_not_abort(hooks):
    aborted: list[str] = []
    pal.set_abort_handler(aborted.append)
    with pytest.raises(OperatorMissingError):
        Runtime.get(kernels=["aten::relu.out"]).load_program(GOLDEN / "mlp.pte").load_method()
    assert aborted == []
