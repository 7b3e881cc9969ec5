#!/usr/bin/env bash
# Set up .venv (if needed) and run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
