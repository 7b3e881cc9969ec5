"""Do step times change once many step functions exist, or only while many are interleaved?"""
import os, sys, time
sys.path.insert(0, os.getcwd())
import tf_environment  # noqa
import numpy as np
import profiler
from experiments.time_model_62.steps import base_masks, model_for
from train_step import TrainStep, shared_forward, make_optimizer
from measure import wall_times_ms
name, size, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
model = model_for(name, size)
points = profiler.tensor_points(model)
base = base_masks(points)
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
