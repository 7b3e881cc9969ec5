#!/usr/bin/env bash
# Set up .venv (if needed) and run the test suite. Extra arguments go to pytest.
#   bash scripts/test.sh          every test (14-19 min on 2 cores; what CI runs)
#   bash scripts/test.sh --fast   without the slow tier (end-to-end training and profiling): ~2 min
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
if [ "${1:-}" = "--fast" ]; then
  shift
  exec .venv/bin/python -m pytest -m "not slow" "$@"
fi
exec .venv/bin/python -m pytest "$@"
