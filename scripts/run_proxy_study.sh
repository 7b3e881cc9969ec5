#!/usr/bin/env bash
# The offline study: the paper's Fig. 15-, 17- and 19-style figures and its claims table on the
# embedded dataset, with the calibrated study protocol (MobileNetV2, 64 px, frozen BatchNorm,
# lr 0.003) shortened to 4 epochs and one seed: 9 runs, about 11 minutes on 2 CPU cores
# once the source backbone is cached (making it takes ~16 min once). Resumes where it stopped.
# For the paper-scale claims (12 epochs, 3 seeds, hours): python scripts/study.py run claims.
#   bash scripts/run_proxy_study.sh [--dry_run]
# Figures: figures/proxy_figure*.png (listed in figures/README.md); table:
# figures/proxy_claims.md; runs: logs/figures/proxy/ (tensorboard --logdir logs/figures/proxy).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
start=$(date +%s)
echo "== the offline study: 9 training runs of 4 epochs (about 11 min on 2 cores; the estimate"
echo "   from this machine's profile follows)"
DRY=0; for argument in "$@"; do [ "$argument" = --dry_run ] && DRY=1; done
BACKBONE=saved_models/source_mobilenetv2_64.h5
if [ ! -f "$BACKBONE" ] && [ "$DRY" = 0 ]; then
  echo "== no cached source backbone: pre-training it once first (15 epochs, ~16 min on 2 cores; later"
  echo "   runs of the study reuse it), then the 9 runs"
  bash scripts/make_source_backbone.sh mobilenetv2 64 >/dev/null
fi
$PY scripts/figures.py run 17ac 15 19 --proxy "$@"
[ "$DRY" = 1 ] && exit 0
$PY scripts/figures.py table --proxy --output figures/proxy_claims.md
echo "offline study finished in $(( $(date +%s) - start )) s; figures in figures/ (see figures/README.md)"
