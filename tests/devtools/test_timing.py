"""`time_calls`: alternating rounds whose order rotates, each sample charged to its own function."""

from __future__ import annotations

from torchedge.devtools import timing
from torchedge.devtools.timing import time_calls


def test_rounds_rotate_so_each_function_follows_each_other_equally_often(monkeypatch):
    """A fake clock that each call advances by its function's own cost: the samples are exactly
    those costs, whatever the order, and the order starts one function later every round."""
    now, calls = [0.0], []
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])

    def call(name: str, cost: float):
        def run():
            calls.append(name)
            now[0] += cost

        return run

    result = time_calls({"a": call("a", 1.0), "b": call("b", 2.0), "c": call("c", 3.0)}, repeat=6, warmup=0)
    assert [calls[i : i + 3] for i in range(0, 18, 3)] == [list("abc"), list("bca"), list("cab")] * 2
    assert {name: t.samples for name, t in result.items()} == {"a": (1.0,) * 6, "b": (2.0,) * 6, "c": (3.0,) * 6}


def test_no_functions_no_timings():
    assert time_calls({}, repeat=3) == {}
