"""Is a round's slowness shared by every step in it? Spread of raw times and of times over the
same round's full step, across rounds (issue 62).

    python experiments/time_model_62/rounds.py DenseNet121 64 16 [ROUNDS] [STEPS]
"""
import os, sys
sys.path.insert(0, os.getcwd())
import tf_environment  # noqa
import numpy as np, tensorflow as tf
from measure import wall_times_ms
from experiments.time_model_62.steps import NAMES, seven_steps
name, size, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rounds, steps = (int(sys.argv[4]), int(sys.argv[5])) if len(sys.argv) > 5 else (8, 10)
if os.environ.get("INTER_OP"):  # e.g. INTER_OP=1: one op at a time, each op on every core
    tf.config.threading.set_inter_op_parallelism_threads(int(os.environ["INTER_OP"]))
trainers, images, labels = seven_steps(name, size, batch)
labels_ = NAMES
calls = [lambda s=s: s(images, labels)[0].numpy() for s in trainers]
table = np.array([wall_times_ms(calls, steps) for _ in range(rounds)])  # rounds x selections
print(f"inter-op threads {tf.config.threading.get_inter_op_parallelism_threads()} (0: TensorFlow's default)")
print(f"{name} {size} px / {batch}: {rounds} rounds of {steps} steps, ms (25th percentiles)")
print("round " + "".join(f"{l:>10}" for l in labels_))
for r, row in enumerate(table, 1):
    print(f"{r:>5} " + "".join(f"{ms:>10.1f}" for ms in row))
ratio = table / table[:, [2]]
spread = lambda t: np.ptp(t, 0) / np.median(t, 0)
print("raw spread   " + "".join(f"{s:>10.1%}" for s in spread(table)))
print("over full    " + "".join(f"{s:>10.1%}" for s in spread(ratio)))
print(f"median spread: raw {np.median(spread(table)):.1%}, over the round's full step "
      f"{np.median(np.delete(spread(ratio), 2)):.1%}")
