#!/usr/bin/env bash
# Install what the suite needs (idempotent), then run the whole test suite, spread over the
# machine's CPUs (pytest-xdist; tests are independent and take their own temporary files).
set -euo pipefail
cd "$(dirname "$0")"
bash setup.sh --no-demo
exec .venv/bin/python -m pytest -q -n auto --dist worksteal "$@"
