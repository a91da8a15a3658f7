"""The optimized kernels' per-call scratch memory and their table of tuned constants."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from torchedge.errors import InputError
from torchedge.kernels.optimized import scratch, tuning


def test_scratch_arrays_of_one_call_never_overlap_and_later_calls_reuse_them():
    @scratch.per_call
    def kernel():
        a = scratch.scratch((3, 5), np.float32)
        b = scratch.scratch((7,), np.int64)
        a[...], b[...] = 1.5, 7
        assert not np.may_share_memory(a, b)
        assert a.dtype == np.float32 and b.shape == (7,) and a.ctypes.data % 64 == 0
        return a.ctypes.data

    scratch.release_scratch()
    kernel()  # the first call allocates; the arena then holds what it needed
    assert scratch.arena_bytes() >= 3 * 5 * 4 + 7 * 8
    assert kernel() == kernel()  # the same memory, call after call


def test_a_nested_scope_releases_its_arrays_and_keeps_the_outer_ones():
    @scratch.per_call
    def inner():
        return scratch.scratch((4,), np.float64).ctypes.data

    @scratch.per_call
    def outer():
        kept = scratch.scratch((4,), np.float64)
        kept[...] = 3
        first, second = inner(), inner()
        assert first == second and first != kept.ctypes.data
        assert np.all(kept == 3)

    outer()
    outer()


def test_scratch_outside_a_call_is_a_fresh_array():
    a, b = scratch.scratch((2,), np.float32), scratch.scratch((2,), np.float32)
    assert not np.may_share_memory(a, b)


def test_every_tuned_constant_says_what_it_decides_and_where_it_was_measured():
    for name, entry in tuning.TABLE.items():
        assert entry.name == name and entry.decides and tuning.MACHINE in entry.measured
        assert tuning.tuned(name) == entry.default


def test_set_tuning_overrides_and_restores():
    tuning.set_tuning("winograd_min_tiles", 5)
    try:
        assert tuning.tuned("winograd_min_tiles") == 5
    finally:
        tuning.set_tuning("winograd_min_tiles", None)
    assert tuning.tuned("winograd_min_tiles") == tuning.TABLE["winograd_min_tiles"].default
    with pytest.raises(InputError, match="no tuned constant 'winograd'"):
        tuning.set_tuning("winograd", 1)
    with pytest.raises(InputError, match="non-negative number"):
        tuning.set_tuning("winograd_min_tiles", "many")


def test_the_environment_overrides_a_constant():
    code = "from torchedge.kernels.optimized.tuning import tuned; print(tuned('conv_rows_gap_cost'))"
    env = {"TORCHEDGE_TUNING_CONV_ROWS_GAP_COST": "2.5", "PATH": ""}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "2.5"
    env["TORCHEDGE_TUNING_CONV_ROWS_GAP_COST"] = "lots"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode != 0 and "is not a number" in result.stderr


def test_the_kernels_page_lists_every_tuned_constant_with_its_default():
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "kernels.md").read_text()
    rows = dict(line.split(" | ")[:2] for line in page.splitlines() if line.startswith("| `"))
    assert {name.strip("| `"): float(value) for name, value in rows.items()} == {
        name: float(entry.default) for name, entry in tuning.TABLE.items()
    }
