#!/usr/bin/env bash
# Peak resident memory of one training process per scheme, on the study protocol (MobileNetV2,
# 64 px, batch 32, frozen BatchNorm, the cached source backbone), one epoch each, one after
# another; prints a table from each run's summary (peak_memory_mb: ru_maxrss of the process,
# TensorFlow's runtime and the in-memory dataset included, as a user's process would hold).
#   bash bench/peak_memory.sh [SCHEME ...]      (default: the claims table's schemes)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh >&2
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
BACKBONE=saved_models/source_mobilenetv2_64.h5
[ -f "$BACKBONE" ] || { echo "no $BACKBONE: make it with bash scripts/make_source_backbone.sh mobilenetv2 64" >&2; exit 2; }
SCHEMES=("$@")
[ ${#SCHEMES[@]} -gt 0 ] || SCHEMES=(full_training "elastic_training --rho 0.533 --rho_mode paper"
  bn_plus_bias_training traditional_tl_training tinytl_bias_training tinytl_lite_residual_training
  "sparse_update_training --rho 0.533 --rho_mode paper" "gradient_filter_training --gf_radius 2 --gf_blocks 4"
  "elastic_training --rho 0.533 --rho_mode paper --gf_radius 2 --gf_blocks 4")
RUNS=logs/bench_peak_memory/$(date +%Y%m%d-%H%M%S)
for scheme in "${SCHEMES[@]}"; do
  if [[ "$scheme" == *--rho* || "$scheme" == *--gf_radius* ]]; then  # its profile, with its own filter flags
    gf=$(grep -oE -- '--gf_(radius|blocks) [0-9]+' <<<"$scheme" | tr '\n' ' ' || true)
    # shellcheck disable=SC2086
    $PY profiler.py --model_name mobilenetv2 --input_size 64 --num_classes 64 --batch_size 32 $gf >&2 || {
      echo "profiling for '$scheme' failed (above); skipping it" >&2; continue; }
  fi
  # shellcheck disable=SC2086  # the scheme's extra flags split on purpose
  $PY main.py $($PY -m experiments.study_plans mobilenetv2) --weights "$BACKBONE" --num_epochs 1 --reference_steps 0 \
    --train_type $scheme --logdir "$RUNS" --run_name "$(echo "$scheme" | tr ' ' '_' | tr -d '-')" >/dev/null \
    || echo "'$scheme' failed (above); going on" >&2
done
$PY - "$RUNS" <<'PY'
import json, os, sys
print(f"{'run':<70}{'peak MB':>9}")
for name in sorted(os.listdir(sys.argv[1])):
    path = os.path.join(sys.argv[1], name, "summary.json")
    if os.path.exists(path):
        print(f"{name:<70}{json.load(open(path))['peak_memory_mb']:>9.0f}")
PY
