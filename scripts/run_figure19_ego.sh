#!/usr/bin/env bash
# Fig. 19: ResNet50, VGG16, MobileNetV2 and ViT (Adam) on CUB-200, ElasticTrainer at rho 0.4
# against the baselines; bars.
# ElasticTrainer's runs only (the original's _ego script).
# The paper's setting (ImageNet weights, 224 px, batch 4, SGDW lr 1e-4, 12 epochs): a network
# once, hours to days of compute. Resumes where it stopped; figures go to figures/.
#   bash scripts/run_figure19_ego.sh [--dry_run] [--proxy] [--logdir DIR]    (see python
# scripts/figures.py --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=3
exec .venv/bin/python scripts/figures.py run 19 --ego "$@"
