"""Golden `.pte` files written by the real ExecuTorch, replayed on the torchedge runtime.

The files and their expected outputs come from ``tools/make_golden_pte.py``. Nothing here
imports torch or executorch; `test_golden_runs_without_torch` proves it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import assert_matches
from torchedge.runtime import Runtime

GOLDEN_DIR = Path(__file__).resolve().parent
NAMES = sorted(p.stem for p in GOLDEN_DIR.glob("*.pte"))
REPO_ROOT = GOLDEN_DIR.parent.parent


def load_expected(name: str) -> dict[str, list[tuple[list, list]]]:
    """``{method: [(inputs, outputs) of each consecutive call]}`` from ``<name>.npz``."""
    with np.load(GOLDEN_DIR / f"{name}.npz") as npz:
        arrays = dict(npz)

    def numbered(prefix: str) -> list:
        count = sum(1 for key in arrays if key.startswith(prefix))
        return [arrays[f"{prefix}{i}"] for i in range(count)]

    expected = {}
    for method in arrays.pop("methods").tolist():
        calls = sorted({int(key.split("/")[1]) for key in arrays if key.startswith(f"{method}/")})
        expected[method] = [(numbered(f"{method}/{k}/in"), numbered(f"{method}/{k}/out")) for k in calls]
    return expected


def check_golden(name: str) -> None:
    """Run every method of ``<name>.pte``, one loaded instance per method, and compare each call."""
    program = Runtime.get().load_program(GOLDEN_DIR / f"{name}.pte")
    expected = load_expected(name)
    assert sorted(program.method_names) == sorted(expected)
    for method_name, calls in expected.items():
        method = program.load_method(method_name)
        for k, (inputs, want) in enumerate(calls):
            got = [np.asarray(o) for o in method.execute(inputs)]
            assert len(got) == len(want), f"{name}.{method_name} call {k}: {len(got)} outputs, expected {len(want)}"
            for j, (g, w) in enumerate(zip(got, want)):
                where = f"{name}.{method_name} call {k} output {j}"
                assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
                if w.dtype.kind == "f":
                    assert_matches([g], [w])
                else:
                    np.testing.assert_array_equal(g, w, err_msg=where)


def test_golden_files_present():
    assert {"mlp", "cnn", "dynamic", "multi_method", "stateful", "int_bool", "constant_method", "segments"} <= set(
        NAMES
    )
    assert sum((GOLDEN_DIR / f"{n}.{ext}").stat().st_size for n in NAMES for ext in ("pte", "npz")) < 1 << 20


@pytest.mark.parametrize("name", NAMES)
def test_golden_outputs(name):
    check_golden(name)


@pytest.mark.parametrize("name", NAMES)
def test_golden_metadata(name):
    program = Runtime.get().load_program(GOLDEN_DIR / f"{name}.pte")
    for method_name, calls in load_expected(name).items():
        meta = program.metadata(method_name)
        inputs, outputs = calls[0]
        assert meta.name == method_name
        assert (len(meta.inputs), len(meta.outputs)) == (len(inputs), len(outputs))
        for tensor_meta, array in zip(meta.inputs, inputs):
            assert tensor_meta.dtype == array.dtype and len(tensor_meta.shape) == array.ndim


TORCH_FREE = """
import sys
sys.modules["torch"] = sys.modules["executorch"] = None  # any import of them now fails
from tests.golden.test_golden_pte import NAMES, check_golden
for name in NAMES:
    check_golden(name)
bad = sorted(m for m in sys.modules if m.startswith(("torch.", "executorch.", "torchedge.exir")))
assert not bad, bad
print("checked", len(NAMES))
"""


def test_golden_runs_without_torch():
    """The same checks in a fresh interpreter where torch and executorch cannot be imported."""
    result = subprocess.run([sys.executable, "-c", TORCH_FREE], capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["checked", str(len(NAMES))]
