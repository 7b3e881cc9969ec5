#!/usr/bin/env bash
# The offline demo: ElasticTrainer against full training on the embedded dataset.
#   1. generate the embedded dataset (source and target tasks) and preview it;
#   2. pre-train MobileNetV2 on the source task (the offline stand-in for ImageNet weights);
#   3. profile per-tensor training times on this machine;
#   4. fine-tune on the target task: full training, then ElasticTrainer at rho = 0.5;
#   5. plot test accuracy against training time.
# Steps 1-3 are skipped when their outputs exist. Results: figures/demo_accuracy_vs_time.png,
# TensorBoard logs in logs/demo/<time>/ (tensorboard --logdir logs/demo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PY=.venv/bin/python
export TF_CPP_MIN_LOG_LEVEL=3
EPOCHS=${DEMO_EPOCHS:-5}                 # fine-tuning epochs per run
PRETRAIN_EPOCHS=${DEMO_PRETRAIN_EPOCHS:-5} # source-task epochs (more: a stronger backbone)
RUNS="logs/demo/$(date +%Y%m%d-%H%M%S)"
MODEL=(--model_name mobilenetv2 --input_size 64)
BACKBONE=saved_models/demo_mobilenetv2_source.h5
start=$(date +%s)

echo "== 1/5 embedded dataset (generated once into ~/tensorflow_datasets)"
[ -f figures/embedded_shapes_samples.png ] || $PY scripts/preview_dataset.py embedded_shapes
[ -f figures/embedded_shapes_source_samples.png ] || $PY scripts/preview_dataset.py embedded_shapes_source --classes 10

echo "== 2/5 pre-train the backbone on the source task"
if [ ! -f "$BACKBONE" ]; then
  $PY main.py "${MODEL[@]}" --dataset_name embedded_shapes_source --train_type full_training \
    --weights none --optimizer adam --learning_rate 2e-3 --batch_size 64 --num_epochs "$PRETRAIN_EPOCHS" \
    --logdir "$RUNS" --run_name pretrain_source --save_model true
  mv "saved_models/pretrain_source.h5" "$BACKBONE"
fi

echo "== 3/5 profile tensor timings on this machine"
$PY profiler.py "${MODEL[@]}" --num_classes 64 --batch_size 32

echo "== 4/5 fine-tune on the target task: full training, then ElasticTrainer (rho = 0.5)"
COMMON=("${MODEL[@]}" --dataset_name embedded_shapes --batch_size 32 --weights "$BACKBONE"
        --learning_rate 0.02 --num_epochs "$EPOCHS" --logdir "$RUNS" --save_txt true)
$PY main.py "${COMMON[@]}" --train_type full_training --run_name full_training
RHO=${DEMO_RHO:-0.5}
$PY main.py "${COMMON[@]}" --train_type elastic_training --rho "$RHO" --interval 2 --run_name "elastic_rho$RHO"

echo "== 5/5 compare"
$PY scripts/plot_runs.py "$RUNS/full_training" "$RUNS/elastic_rho$RHO" \
  --output figures/demo_accuracy_vs_time.png --title "MobileNetV2 on embedded_shapes (64 px, batch 32)"
echo "demo finished in $(( $(date +%s) - start )) s. Look at figures/demo_accuracy_vs_time.png, the"
echo "selection masks and curves in TensorBoard (.venv/bin/tensorboard --logdir $RUNS), and"
echo "figures/mobilenetv2_64_64_32_profile.png (per-tensor timings)."
