#!/usr/bin/env bash
# Does pre-training on embedded_shapes_source help the target task, as ImageNet helps CUB-200?
# Full training on embedded_shapes from the source-pretrained backbone and from scratch, same
# schedule and time; prints both curves' table and writes figures/transfer_<model>_<input>.png.
#   bash scripts/bench_transfer.sh [MODEL INPUT BATCH EPOCHS]   (needs the demo's backbone)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
MODEL=${1:-mobilenetv2}; INPUT=${2:-64}; BATCH=${3:-32}; EPOCHS=${4:-8}
BACKBONE=${WEIGHTS:-saved_models/demo_${MODEL}_source.h5}
RUNS="logs/bench_transfer/${MODEL}_${INPUT}_$(date +%Y%m%d-%H%M%S)"
[ -f "$BACKBONE" ] || { echo "no backbone at $BACKBONE: run bash scripts/run_demo.sh first or set WEIGHTS" >&2; exit 2; }
for init in pretrained scratch; do
  weights=$BACKBONE; [ "$init" = scratch ] && weights=none
  $PY main.py --model_name "$MODEL" --input_size "$INPUT" --dataset_name embedded_shapes --batch_size "$BATCH" \
    --weights "$weights" --learning_rate 0.02 --num_epochs "$EPOCHS" --train_type full_training \
    --logdir "$RUNS" --run_name "$init"
done
$PY scripts/plot_runs.py "$RUNS/pretrained" "$RUNS/scratch" --output "figures/transfer_${MODEL}_${INPUT}.png" \
  --title "full training on embedded_shapes: source-pretrained vs scratch"
