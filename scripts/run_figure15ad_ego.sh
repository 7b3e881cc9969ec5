#!/usr/bin/env bash
# Fig. 15 (a)(d): the CUB-200 part of Fig. 15 only.
# ElasticTrainer's runs only (the original's _ego script).
# The paper's setting (ImageNet weights, 224 px, batch 4, SGDW lr 1e-4, 12 epochs): a network
# once, hours to days of compute. Resumes where it stopped; figures go to figures/.
#   bash scripts/run_figure15ad_ego.sh [--dry_run] [--proxy] [--logdir DIR]    (see python
# scripts/figures.py --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=3
exec .venv/bin/python scripts/figures.py run 15ad --ego "$@"
