#!/usr/bin/env bash
# The offline demo: set up .venv, generate the embedded dataset, and save a preview figure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=2

echo "== 1. Generate the embedded offline dataset (source and target tasks) and preview it"
$PY scripts/preview_dataset.py embedded_shapes_source --classes 10
$PY scripts/preview_dataset.py embedded_shapes
