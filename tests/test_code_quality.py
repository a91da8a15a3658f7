"""The habits CI enforces: ruff's lint rules and formatting, mypy on the package, a size budget
per module and the docstring examples (configuration in pyproject.toml)."""

import doctest
import importlib
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import torchedge

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["src", "tests", "tools", "benchmarks", "examples"]
MAX_LINES = 400


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: bash setup.sh installs the dev tools")
    return found


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint():
    result = _run(_tool("ruff"), "check", *CHECKED)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    result = _run(_tool("ruff"), "format", "--check", *CHECKED)
    assert result.returncode == 0, "run `ruff format`:\n" + result.stdout + result.stderr


def test_mypy():
    result = _run(_tool("mypy"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_modules_stay_within_the_size_budget():
    src = ROOT / "src"
    over = {}
    for path in sorted(src.rglob("*.py")):
        name = path.relative_to(src).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            over[name] = lines
    assert not over, f"modules over {MAX_LINES} lines (split them): {over}"


def _modules_with_examples() -> list[str]:
    """Modules whose source holds a docstring example (``>>>``)."""
    names = []
    for info in pkgutil.walk_packages(torchedge.__path__, "torchedge."):
        path = ROOT / "src" / info.name.replace(".", "/")
        path = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        if ">>>" in path.read_text():
            names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"
