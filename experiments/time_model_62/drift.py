"""Do step times change once many step functions exist, or only while many are interleaved?"""
import os, sys, time
sys.path.insert(0, os.getcwd())
import tf_environment  # noqa
import numpy as np, tensorflow as tf
import models, profiler, profile_tables
from train_step import TrainStep, shared_forward, make_optimizer
from measure import wall_times_ms
name, size, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tf.keras.utils.set_random_seed(0)
model = models.build_model(name, 64, size, "none", "frozen") if name in models.MODELS else models.build_keras_application(name, 64, size, "frozen")
points = profiler.tensor_points(model); n = len(points)
as_mask = lambda idx: np.isin(np.arange(n), idx).astype(np.uint8)
base = [as_mask(profile_tables.point_tensors(points, -1)), as_mask(profile_tables.point_tensors(points, 0)), np.ones(n, np.uint8)]
others = profiler._random_masks(points, 26, np.random.default_rng(1))
setup = make_optimizer("sgd", 1e-4, 5e-4, 1000)
images, labels = profiler.random_batch(model, batch, 0)
forward = shared_forward(model)
make = lambda m: TrainStep(model, setup.optimizer, [w for w, k in zip(model.trainable_weights, m) if k], forward=forward)
first = [make(m) for m in base]
call = lambda s: (lambda: s(images, labels)[0].numpy())
for _ in range(5):
    for s in first: s(images, labels)[0].numpy()
a = wall_times_ms([call(s) for s in first], 20)
a_long = wall_times_ms([call(s) for s in first], 20, block=20)
print("A  3 functions, block 5 :", np.round(a, 1), flush=True)
print("A' 3 functions, block 20:", np.round(a_long, 1), flush=True)
rest = [make(m) for m in others]
for _ in range(3):
    for s in rest: s(images, labels)[0].numpy()
b = wall_times_ms([call(s) for s in first + rest], 20)
print("B  29 functions, block 5:", np.round(b[:3], 1), flush=True)
c = wall_times_ms([call(s) for s in first], 20)
c_long = wall_times_ms([call(s) for s in first], 20, block=20)
print("C  3 functions again, block 5 :", np.round(c, 1), flush=True)
print("C' 3 functions again, block 20:", np.round(c_long, 1), flush=True)
