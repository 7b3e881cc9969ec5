#!/usr/bin/env bash
# Fig. 17 (a)(c): ResNet50 on CUB-200, ElasticTrainer at rho 0.367, 0.4, 0.533, 0.6 and 0.7
# against full training, traditional TL, BN+bias and PruneTrain; bars of wall time and accuracy.
# The paper's setting (ImageNet weights, 224 px, batch 4, SGDW lr 1e-4, 12 epochs): a network
# once, hours to days of compute. Resumes where it stopped; figures go to figures/.
#   bash scripts/run_figure17ac.sh [--dry_run] [--proxy] [--logdir DIR]    (see python
# scripts/figures.py --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=3
exec .venv/bin/python scripts/figures.py run 17ac "$@"
