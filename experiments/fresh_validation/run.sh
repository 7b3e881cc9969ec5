#!/usr/bin/env bash
# One run of the fixture's command through one of this folder's wrappers, at any checkout.
#   usage: bash run.sh CHECKOUT WRAPPER SEED VALIDATION TAG [main.py flags...]
#   env:   FOLDER (the unpacked folder, default /tmp/fv/folder), OUT (logs and outputs, default /tmp/fv/out),
#          and the wrapper's own: VARIANT, SHUFFLE_SEED (variant.py), HEAD (headinit.py, probe_run.py)
# e.g.     git worktree add /tmp/old 78d1cd2 && ln -s $PWD/.venv /tmp/old/.venv
#          HEAD=zeros bash experiments/fresh_validation/run.sh /tmp/old headinit.py 0 auto old_zeros_s0
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CHECKOUT=$1 WRAPPER=$2 SEED=$3 VALIDATION=$4 TAG=$5; shift 5
FOLDER=${FOLDER:-/tmp/fv/folder} OUT=${OUT:-/tmp/fv/out}
SHARED=$(cd "$HERE/../../../shared" && pwd)
mkdir -p "$OUT"
cd "$CHECKOUT"
FOLDER=$FOLDER .venv/bin/python "$HERE/$WRAPPER" --model_name mobilenetv2 --input_size 64 --dataset_name image_folder \
  --data_dir "$FOLDER" --batch_size 32 --num_epochs 12 --interval 4 --bn_mode frozen \
  --weights "$SHARED/fixtures/fresh_validation/source_backbone.h5" --learning_rate 0.003 \
  --seed "$SEED" --train_type full_training --validation "$VALIDATION" --logdir "$OUT/logs_$TAG" "$@" > "$OUT/$TAG.log" 2>&1
grep "Final test\|PROBE\|label right" "$OUT/$TAG.log" || true
