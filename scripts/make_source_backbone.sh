#!/usr/bin/env bash
# Pre-train a backbone on the embedded source task (the offline stand-in for ImageNet weights)
# once, and cache it; every study script reuses it instead of training again.
#   bash scripts/make_source_backbone.sh [MODEL] [INPUT] [TASK]    (defaults: mobilenetv2 64 shapes)
# TASK shapes pre-trains on embedded_shapes_source and writes saved_models/source_<MODEL>_<INPUT>.h5;
# TASK parts on embedded_parts_source, into saved_models/source_parts_<MODEL>_<INPUT>.h5 (skipped
# when it exists); the path is printed last. With SOURCE_EPOCHS other than 15 the file name ends in
# _<EPOCHS>ep.h5. The source task's validation split (main.py's default) picks the saved epoch.
# Environment: SOURCE_EPOCHS (default 15), SOURCE_BATCH (64), SOURCE_LR (2e-3, Adam, cosine).
# BatchNorm trains in batch-statistics mode here: a network trained from scratch needs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh >&2
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}
MODEL=${1:-mobilenetv2}; INPUT=${2:-64}; TASK=${3:-shapes}
case "$TASK" in
  shapes) PREFIX=source ;;
  parts) PREFIX=source_parts ;;
  *) echo "make_source_backbone: unknown task '$TASK'; choose shapes or parts" >&2; exit 2 ;;
esac
EPOCHS=${SOURCE_EPOCHS:-15}; BATCH=${SOURCE_BATCH:-64}; LR=${SOURCE_LR:-2e-3}
SUFFIX=""; [ "$EPOCHS" = 15 ] || SUFFIX="_${EPOCHS}ep"
BACKBONE=saved_models/${PREFIX}_${MODEL}_${INPUT}${SUFFIX}.h5
if [ ! -f "$BACKBONE" ]; then
  echo "pre-training $MODEL at $INPUT px on embedded_${TASK}_source for $EPOCHS epochs -> $BACKBONE" >&2
  RUN=pretrain_${PREFIX}_${MODEL}_${INPUT}${SUFFIX}
  rm -rf "logs/source/$RUN"  # an interrupted attempt's logs would make main.py rename the run
  $PY main.py --model_name "$MODEL" --input_size "$INPUT" --dataset_name "embedded_${TASK}_source" \
    --train_type full_training --bn_mode train --weights none --optimizer adam --learning_rate "$LR" \
    --batch_size "$BATCH" --num_epochs "$EPOCHS" --logdir logs/source --run_name "$RUN" \
    --save_model true --reference_steps 0 >&2
  mv "saved_models/$RUN.h5" "$BACKBONE"
fi
echo "$BACKBONE"
