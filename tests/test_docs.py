"""The documentation: the site builds with warnings as errors, its generated pages match their
sources, the README stays short and its example runs, and no benchmark history creeps back."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "api" / "runtime" / "index.html").exists()


def test_cli_reference_is_up_to_date(capsys):
    assert _tool("generate_cli_docs").main(["--check"]) == 0, capsys.readouterr().out


def test_cli_reference_lists_every_command():
    from torchedge.cli.parser import build_parser

    page = (DOCS / "cli-reference.md").read_text()
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for name in commands:
        assert f"## `torchedge {name}`" in page
        assert f"`torchedge {name}" in README.read_text(), f"the README's command table lacks {name}"


def test_performance_page_is_up_to_date(capsys):
    assert _tool("generate_performance_page").main(["--check"]) == 0, capsys.readouterr().out


def test_readme_is_short_and_starts_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200
    top = "\n".join(lines[:10])
    assert "bash setup.sh" in top and "bash test.sh" in top


def test_readme_example_runs_and_matches_getting_started(tmp_path, monkeypatch, capsys):
    (example,) = _PYTHON_BLOCK.findall(README.read_text())[:1]
    assert example in _PYTHON_BLOCK.findall((DOCS / "getting-started.md").read_text())
    monkeypatch.chdir(tmp_path)  # it writes tinynet.pte
    exec(compile(example, "README.md", "exec"), {"__name__": "__readme__"})
    error = float(capsys.readouterr().out.rsplit("=", 1)[1])
    assert error < 1e-5 and (tmp_path / "tinynet.pte").exists()


def test_readme_links_resolve():
    for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if not link.startswith("http"):
            assert (ROOT / link).exists(), f"README.md links to {link}, which does not exist"


@pytest.mark.parametrize("marker", ["Measured and dropped", "Latest round", "rounds before", "round before"])
def test_no_benchmark_history(marker):
    for path in [README, *sorted(DOCS.rglob("*.md"))]:
        assert marker.lower() not in path.read_text().lower(), f"{path.relative_to(ROOT)} mentions {marker!r}"
