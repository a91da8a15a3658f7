#!/usr/bin/env bash
# Install what the suite needs (idempotent), then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"
bash setup.sh --no-demo
exec .venv/bin/python -m pytest -q "$@"
