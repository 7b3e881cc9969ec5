#!/usr/bin/env bash
# Fig. 15 (a)-(f): ResNet50 on CUB-200, Oxford-IIIT Pet and Stanford Dogs; test accuracy and
# training loss against wall time for ElasticTrainer (rho 0.533), full training, traditional TL
# and BN+bias, and the selection heat maps.
# ElasticTrainer's runs only (the original's _ego script).
# The paper's setting (ImageNet weights, 224 px, batch 4, SGDW lr 1e-4, 12 epochs): a network
# once, hours to days of compute. Resumes where it stopped; figures go to figures/.
#   bash scripts/run_figure15_ego.sh [--dry_run] [--proxy] [--logdir DIR]    (see python
# scripts/figures.py --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=3
exec .venv/bin/python scripts/figures.py run 15 --ego "$@"
