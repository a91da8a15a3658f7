#!/usr/bin/env bash
# Create .venv, install torchedge with everything its tests and benchmarks use,
# then (unless --no-demo) run the main job: compile a built-in model to .pte,
# run it with the NumPy runtime and check it against PyTorch eager.
set -euo pipefail
cd "$(dirname "$0")"

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt)
"${PIP[@]}" -e ".[dev]"
# The real ExecuTorch: a test oracle and benchmark baseline, never imported by torchedge. What its
# tests here need is installed first; ExecuTorch itself last and without its other requirements
# (coremltools, hydra, scikit-learn...: none of them used here), so pip has no conflict to report.
"${PIP[@]}" torchao==0.18.0 pyyaml ruamel.yaml sympy tabulate packaging typing-extensions expecttest parameterized
"${PIP[@]}" --no-deps executorch==1.5.1

if [ "${1:-}" != "--no-demo" ]; then
  .venv/bin/torchedge check "${MODEL:-cnn}"
fi
