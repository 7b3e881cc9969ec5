#!/usr/bin/env bash
# Issue 63's equality runs: the same three short runs on a code state, to compare before and after a
# restructuring (experiments/refactor_63/compare.py, compare_tb.py). Run from the checkout to test:
#   bash experiments/refactor_63/equal.sh CHECKOUT LOGDIR PROFILE
# CHECKOUT: the code state's worktree (with its .venv or a link to one); LOGDIR: where the runs go;
# PROFILE: one profile both states share (profiler.py --model_name mobilenetv2 --input_size 64
# --num_classes 64 --batch_size 32 --bn_mode frozen), so that their selections can be compared.
set -euo pipefail
CHECKOUT=$1; LOGDIR=$2; PROFILE=$3
BACKBONE=$(realpath saved_models/source_parts_mobilenetv2_64.h5)
cd "$CHECKOUT"
export TF_CPP_MIN_LOG_LEVEL=3
P="--model_name mobilenetv2 --dataset_name embedded_parts --input_size 64 --batch_size 32 --learning_rate 0.003 --bn_mode frozen --validation fresh"
C="$P --weights $BACKBONE --num_epochs 4 --interval 2 --profile $PROFILE --logdir $LOGDIR --seed 0"
.venv/bin/python main.py $C --train_type elastic_training --rho 0.533 --rho_mode paper --run_name elastic
.venv/bin/python main.py $C --train_type gain_stage_training --rho 0.533 --rho_mode paper --run_name gain_stage
.venv/bin/python main.py $C --train_type traditional_tl_training --run_name traditional_tl
