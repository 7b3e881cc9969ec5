"""Every step's wall time, kept: which estimator of a step's time is steadiest on a noisy machine? (issue 62)

    python experiments/time_model_62/samples.py DenseNet121 64 16 OUT.json [BLOCKS] [BLOCK]

Seven step functions (head, path, full, 4 random selections), warm, then BLOCKS rounds in which
each runs BLOCK consecutive steps (interleaved as the profiler times them). Writes every time;
estimators are compared offline (experiments/time_model_62/estimators.py).
"""
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import tf_environment  # noqa
import numpy as np, tensorflow as tf
import models, profiler, profile_tables
from train_step import TrainStep, shared_forward, make_optimizer
name, size, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
blocks, block = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else (40, 3)
tf.keras.utils.set_random_seed(0)
model = models.build_model(name, 64, size, "none", "frozen") if name in models.MODELS else models.build_keras_application(name, 64, size, "frozen")
points = profiler.tensor_points(model); n = len(points)
as_mask = lambda idx: np.isin(np.arange(n), idx).astype(np.uint8)
masks = [as_mask(profile_tables.point_tensors(points, -1)), as_mask(profile_tables.point_tensors(points, 0)), np.ones(n, np.uint8)]
masks += profiler._random_masks(points, 4, np.random.default_rng(1))
names = ["head", "path", "full"] + [f"random {i + 1}" for i in range(4)]
setup = make_optimizer("sgd", 1e-4, 5e-4, 1000)
images, labels = profiler.random_batch(model, batch, 0)
forward = shared_forward(model)
trainers = [TrainStep(model, setup.optimizer, [w for w, k in zip(model.trainable_weights, m) if k], forward=forward) for m in masks]
for _ in range(profiler.WARM_UP_ROUNDS):
    for t in trainers: t(images, labels)[0].numpy()
times = [[] for _ in trainers]  # per function: blocks x steps, ms
for _ in range(blocks):
    for index, t in enumerate(trainers):
        row = []
        for _ in range(block):
            start = time.perf_counter(); t(images, labels)[0].numpy(); row.append((time.perf_counter() - start) * 1000)
        times[index].append(row)
json.dump(dict(model=name, size=size, batch=batch, block=block, names=names, times_ms=times,
               made=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())), open(out, "w"))
print("wrote", out)
