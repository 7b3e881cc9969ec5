# Issue 62's check as it ran before bench/time_model.py's check set existed (at 8513b43, from the
# repository root): two Keras applications outside the registry, profiled and validated in one
# process, then VGG16's step ratio; twice. Output to stdout.
set -x
PY=${PY:-python}
for rep in 1 2; do
for app in "DenseNet121 64 16" "InceptionV3 75 16"; do
  set -- $app
  $PY profiler.py --keras_application $1 --input_size $2 --batch_size $3 --num_classes 64 --force --validate 8 \
      --output_dir /tmp/time_model_62/profiles_$rep --logdir /tmp/time_model_62/trace 2>&1 | grep -v "^WARNING\|^I0000\|oneDNN" | tail -25
done
$PY -m bench.step_ratio --model_name vgg16 --input_size 64 --batch_size 16 --rhos 0.5 0.6 0.8 2>&1 | grep -v "^W0000\|^I0000\|oneDNN" | tail -8
done
