"""Planned memory the process cannot get ends in a typed error naming the memory id and size.

A corrupt (or simply too large) ``non_const_buffer_sizes`` must never reach NumPy as a raw
``MemoryError``: the default limit follows the process's address-space limit, a user limit
(``max_arena_bytes``, ``TORCHEDGE_MAX_ARENA_BYTES``) is checked before allocating, and an
allocation that fails anyway is reported with what it was for.
"""

import pathlib
import subprocess
import sys

import pytest

from torchedge.errors import MemoryPlanError
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte, serialize_pte

GOLDEN = pathlib.Path(__file__).parent.parent / "golden"
GIB = 1 << 30


def _with_planned_size(nbytes: int) -> bytes:
    contents = deserialize_pte((GOLDEN / "mlp.pte").read_bytes()).unpack()
    contents.program.execution_plan[0].non_const_buffer_sizes = [0, nbytes]
    return serialize_pte(contents.program, mutable_data=contents.mutable_data, named_data=contents.named_data)


_UNDER_ADDRESS_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from torchedge.errors import MemoryPlanError
from torchedge.runtime import Runtime
program = Runtime.get().load_program(sys.argv[1])
limit = None if sys.argv[2] == "default" else int(sys.argv[2])
try:
    program.load_method("forward", max_arena_bytes=limit)
except MemoryPlanError as e:
    print("MemoryPlanError:", e)
"""


def _load_under_two_gib(tmp_path, nbytes: int, limit: str) -> str:
    path = tmp_path / "large.pte"
    path.write_bytes(_with_planned_size(nbytes))
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_ADDRESS_LIMIT, str(path), limit], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_default_limit_follows_the_address_space_limit(tmp_path):
    out = _load_under_two_gib(tmp_path, 3 * GIB, "default")
    assert "MemoryPlanError: planned buffer 1 needs 3221225472 bytes, more than the limit" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS is enforced on Linux")
def test_failed_allocation_names_the_memory_id_and_size(tmp_path):
    out = _load_under_two_gib(tmp_path, 3 * GIB, str(4 * GIB))
    assert "MemoryPlanError: planned memory id 1: cannot allocate 3221225472 bytes" in out


def test_user_limit_is_checked_before_allocating():
    program = Runtime.get().load_program(_with_planned_size(1 << 20))
    with pytest.raises(MemoryPlanError, match="planned buffer 1 needs 1048576 bytes, more than the limit of 4096"):
        program.load_method("forward", max_arena_bytes=4096)


def test_environment_sets_the_default_limit(tmp_path):
    path = tmp_path / "small.pte"
    path.write_bytes(_with_planned_size(1 << 20))
    script = (
        "import sys\nfrom torchedge.runtime import Runtime\n"
        "Runtime.get().load_program(sys.argv[1]).load_method('forward')"
    )
    env = {"TORCHEDGE_MAX_ARENA_BYTES": "4096", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env)
    assert "MemoryPlanError: planned buffer 1 needs 1048576 bytes, more than the limit of 4096" in done.stderr
