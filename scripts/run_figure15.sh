#!/usr/bin/env bash
# The paper's Figure 15: test accuracy and training loss over time of every scheme on CUB-200,
# Oxford-IIIT Pet and Stanford Dogs, with the paper's settings (ImageNet weights, 224 px,
# batch 4, SGDW lr 1e-4, 12 epochs, rho 0.533). Needs a network once (TFDS downloads and
# ImageNet weights) and days of CPU time; on a GPU or Jetson, hours. Figures go to
# figures/figure15_<model>_<dataset>.png.
#   bash scripts/run_figure15.sh [MODEL] [EPOCHS]      e.g. bash scripts/run_figure15.sh vgg16
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODEL=${1:-resnet50}; EPOCHS=${2:-12}
for dataset in caltech_birds2011 oxford_iiit_pet stanford_dogs; do
  DATASET=$dataset WEIGHTS=imagenet LR=1e-4 INTERVAL=4 RHO=0.533 \
    OUTPUT="figures/figure15_${MODEL}_${dataset}.png" \
    bash scripts/bench_schemes.sh "$MODEL" 224 4 "$EPOCHS"
done
