"""Every step's wall time, kept: which estimator of a step's time is steadiest on a noisy machine? (issue 62)

    python experiments/time_model_62/samples.py DenseNet121 64 16 OUT.json [BLOCKS] [BLOCK]

Seven step functions (head, path, full, 4 random selections), warm, then BLOCKS rounds in which
each runs BLOCK consecutive steps (interleaved as the profiler times them). Writes every time;
estimators are compared offline (experiments/time_model_62/estimators.py).
"""
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import tf_environment  # noqa
from experiments.time_model_62.steps import NAMES, seven_steps
name, size, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
blocks, block = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else (40, 3)
trainers, images, labels = seven_steps(name, size, batch)
names = NAMES
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
