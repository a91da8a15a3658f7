"""Every operator ExecuTorch's runtime has a kernel for has a torchedge kernel, so every program
ExecuTorch builds loads on torchedge.

The names are tests/golden/executorch_kernel_names.json, written by
tools/executorch_kernel_names.py from the installed ExecuTorch's own registry (portable,
optimized, quantized and LLM custom-op libraries). Needs neither torch nor ExecuTorch.
"""

import json
from pathlib import Path

import pytest

from torchedge.errors import OperatorMissingError
from torchedge.kernels.registry import get_kernel

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "executorch_kernel_names.json"
DOCUMENT = json.loads(GOLDEN.read_text())
NAMES = DOCUMENT["names"]

# Names that cannot have a torchedge kernel, each with the reason. Keep this tiny.
CANNOT_IMPLEMENT: dict[str, str] = {}


def test_golden_file_says_where_it_comes_from():
    header = DOCUMENT["header"]
    assert header["executorch_version"]
    assert "tools/executorch_kernel_names.py" in header["regenerate"]
    assert header["count"] == len(NAMES) > 200
    assert NAMES == sorted(set(NAMES))
    assert all("::" in name for name in NAMES)


def test_allowlist_names_are_in_the_list():
    assert set(CANNOT_IMPLEMENT) <= set(NAMES)


@pytest.mark.parametrize("name", [n for n in NAMES if n not in CANNOT_IMPLEMENT])
def test_executorch_kernel_name_has_a_torchedge_kernel(name):
    get_kernel(name)


def test_every_name_resolves():
    """One failure listing every missing name, for a quick overview."""
    missing = []
    for name in NAMES:
        if name in CANNOT_IMPLEMENT:
            continue
        try:
            get_kernel(name)
        except OperatorMissingError:
            missing.append(name)
    assert not missing, f"{len(missing)} ExecuTorch kernel names have no torchedge kernel: {missing}"
