#!/usr/bin/env bash
# Does pre-training on embedded_shapes_source help the target task, as ImageNet helps CUB-200?
# Full training on embedded_shapes from the source-pretrained backbone and from scratch, same
# schedule and time; prints both curves' table and writes figures/transfer_<model>_<input>.png.
#   bash bench/transfer.sh [MODEL INPUT BATCH EPOCHS]   (needs scripts/make_source_backbone.sh's)
# From the backbone BatchNorm is frozen (the study's protocol, LR 0.003); from scratch it trains
# in batch-statistics mode (random weights need it), at LR_SCRATCH (0.01).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
MODEL=${1:-mobilenetv2}; INPUT=${2:-64}; BATCH=${3:-32}; EPOCHS=${4:-8}
BACKBONE=${WEIGHTS:-saved_models/source_${MODEL}_${INPUT}.h5}
RUNS="logs/bench_transfer/${MODEL}_${INPUT}_$(date +%Y%m%d-%H%M%S)"
[ -f "$BACKBONE" ] || { echo "no backbone at $BACKBONE: make it with bash scripts/make_source_backbone.sh $MODEL $INPUT, or set WEIGHTS" >&2; exit 2; }
for init in pretrained scratch; do
  weights=$BACKBONE; lr=${LR:-0.003}; bn=frozen
  [ "$init" = scratch ] && { weights=none; lr=${LR_SCRATCH:-0.01}; bn=train; }
  $PY main.py --model_name "$MODEL" --input_size "$INPUT" --dataset_name embedded_shapes --batch_size "$BATCH" \
    --weights "$weights" --learning_rate "$lr" --bn_mode "$bn" --num_epochs "$EPOCHS" --train_type full_training \
    --logdir "$RUNS" --run_name "$init"
done
$PY scripts/plot.py curves "$RUNS/pretrained" "$RUNS/scratch" --output "figures/transfer_${MODEL}_${INPUT}.png" \
  --title "full training on embedded_shapes: source-pretrained vs scratch"
