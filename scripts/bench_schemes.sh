#!/usr/bin/env bash
# Every training scheme on the embedded target task, same epochs, from the same source-pretrained
# backbone; then accuracy, wall time and time-to-reach full training's final accuracy per scheme.
#   bash scripts/bench_schemes.sh [MODEL INPUT BATCH EPOCHS RHO INTERVAL]
# Needs the backbone the demo pre-trains (saved_models/demo_<model>_source.h5): run the demo first,
# or set BACKBONE=path. A benchmark: prints a table and writes figures/schemes_<model>_<input>.png.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
MODEL=${1:-mobilenetv2}; INPUT=${2:-64}; BATCH=${3:-32}; EPOCHS=${4:-8}; RHO=${5:-0.5}; INTERVAL=${6:-2}
BACKBONE=${BACKBONE:-saved_models/demo_${MODEL}_source.h5}
LR=${LR:-0.02}
RUNS="logs/bench_schemes/${MODEL}_${INPUT}_$(date +%Y%m%d-%H%M%S)"
[ -f "$BACKBONE" ] || { echo "no backbone at $BACKBONE: run bash scripts/run_demo.sh first or set BACKBONE" >&2; exit 2; }
$PY profiler.py --model_name "$MODEL" --input_size "$INPUT" --num_classes 64 --batch_size "$BATCH"
SCHEMES="full_training elastic_training traditional_tl_training bn_plus_bias_training prune_training
         elastic_training_weight_magnitude elastic_training_grad_magnitude"
for scheme in $SCHEMES; do
  $PY main.py --model_name "$MODEL" --input_size "$INPUT" --dataset_name embedded_shapes --batch_size "$BATCH" \
    --weights "$BACKBONE" --learning_rate "$LR" --num_epochs "$EPOCHS" --train_type "$scheme" --rho "$RHO" \
    --interval "$INTERVAL" --logdir "$RUNS" --run_name "$scheme" --save_txt true 2>&1 | grep -v "step/s"
done
$PY scripts/plot_runs.py $(for s in $SCHEMES; do echo "$RUNS/$s"; done) \
  --output "figures/schemes_${MODEL}_${INPUT}.png" --title "$MODEL $INPUT px on embedded_shapes, rho $RHO"
for s in $SCHEMES; do
  printf '%-36s selection overhead %s\n' "$s" "$($PY -c "import json; print('%.2f %%' % (100 * json.load(open('$RUNS/$s/summary.json'))['selection_overhead_share']))")"
done
