#!/usr/bin/env bash
# Fig. 16: Fig. 15's experiment in the Raspberry Pi setting (CUB-200 and Oxford-IIIT Pet); run
# it on the Pi.
# The paper's setting (ImageNet weights, 224 px, batch 4, SGDW lr 1e-4, 12 epochs): a network
# once, hours to days of compute. Resumes where it stopped; figures go to figures/.
#   bash scripts/run_figure16.sh [--dry_run] [--proxy] [--logdir DIR]    (see python
# scripts/figures.py --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=3
exec .venv/bin/python scripts/figures.py run 16 "$@"
