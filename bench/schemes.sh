#!/usr/bin/env bash
# Every training scheme on one dataset, same epochs and initial weights; then each scheme's
# accuracy, wall time and time to reach full training's final accuracy, and a figure of test
# accuracy and training loss against training time (the paper's Figures 15-16).
#   bash bench/schemes.sh [MODEL INPUT BATCH EPOCHS]        (defaults: mobilenetv2 64 32 8)
# Environment: DATASET (embedded_shapes), WEIGHTS (the cached source backbone,
# saved_models/source_<model>_<input>.h5 from scripts/make_source_backbone.sh), LR (0.003, the
# study's calibrated rate), BN_MODE (frozen), RHO (0.533), RHO_MODE (paper), INTERVAL (2),
# OUTPUT (figure path), SCHEMES (all eight), RHOS (elastic schemes run once per rho in this
# list; default: $RHO).
#   e.g. accuracy against rho: SCHEMES="full_training elastic_training" RHOS="0.5 0.6 0.7" bash ...
# The profile is measured afresh (--force): a stale one would set a wrong step-time target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
MODEL=${1:-mobilenetv2}; INPUT=${2:-64}; BATCH=${3:-32}; EPOCHS=${4:-8}
DATASET=${DATASET:-embedded_shapes}; LR=${LR:-0.003}; RHO=${RHO:-0.533}; INTERVAL=${INTERVAL:-2}
BN_MODE=${BN_MODE:-frozen}; RHO_MODE=${RHO_MODE:-paper}
WEIGHTS=${WEIGHTS:-saved_models/source_${MODEL}_${INPUT}.h5}
OUTPUT=${OUTPUT:-figures/schemes_${MODEL}_${INPUT}_${DATASET}.png}
RUNS="logs/bench_schemes/${MODEL}_${INPUT}_${DATASET}_$(date +%Y%m%d-%H%M%S)"
case "$WEIGHTS" in
  imagenet|none) ;;
  *) [ -f "$WEIGHTS" ] || { echo "no weights at $WEIGHTS: make them with bash scripts/make_source_backbone.sh $MODEL $INPUT, or set WEIGHTS" >&2; exit 2; } ;;
esac
CLASSES=$($PY -c "import sys; sys.path.insert(0, '.'); import data; print(data.num_classes('$DATASET'))")
$PY profiler.py --model_name "$MODEL" --input_size "$INPUT" --num_classes "$CLASSES" --batch_size "$BATCH" --bn_mode "$BN_MODE" --force
SCHEMES=${SCHEMES:-full_training elastic_training traditional_tl_training bn_plus_bias_training prune_training
         static_top_training elastic_training_weight_magnitude elastic_training_grad_magnitude}
RHOS=${RHOS:-$RHO}
names=()
for scheme in $SCHEMES; do
  rhos=$RHO; name=$scheme
  case "$scheme" in elastic*) rhos=$RHOS ;; esac
  for rho in $rhos; do
    case "$scheme" in elastic*|static*) [ "$RHOS" = "$RHO" ] || name="${scheme}_rho$rho" ;; esac
    $PY main.py --model_name "$MODEL" --input_size "$INPUT" --dataset_name "$DATASET" --batch_size "$BATCH" \
      --weights "$WEIGHTS" --learning_rate "$LR" --num_epochs "$EPOCHS" --train_type "$scheme" --rho "$rho" \
      --rho_mode "$RHO_MODE" --bn_mode "$BN_MODE" --interval "$INTERVAL" --logdir "$RUNS" --run_name "$name" --save_txt true
    names+=("$RUNS/$name")
  done
done
$PY scripts/plot.py curves "${names[@]}" --output "$OUTPUT" --title "$MODEL $INPUT px on $DATASET, rho $RHOS"
