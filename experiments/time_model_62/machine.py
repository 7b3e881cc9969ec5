"""Is the step-time noise TensorFlow's or the machine's? The same rounds as rounds.py, with
fixed pieces of work that touch no TensorFlow (issue 62).

    python experiments/time_model_62/machine.py [ROUNDS] [STEPS]

Three kernels of 30-80 ms each: a float32 matmul on numpy's BLAS (its threads, both cores), a
pure-Python loop (one core, no memory traffic) and a 256 MB array copy (memory bandwidth). Timed
as rounds.py times TensorFlow steps (measure.wall_times_ms: blocks of 5, interleaved, the 25th
percentile per round), and the spread across rounds printed the same way.
"""
import os, sys
sys.path.insert(0, os.getcwd())
import numpy as np
from measure import wall_times_ms

rounds, steps = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (8, 10)
rng = np.random.default_rng(0)
a, b = rng.standard_normal((2, 1024, 1024), dtype=np.float32)
big, out = np.ones(2 ** 26, np.float32), np.empty(2 ** 26, np.float32)


def python_loop(n=1_000_000):
    total = 0
    for i in range(n):
        total += i & 7
    return total


kernels = {"matmul": lambda: a @ b, "python": python_loop, "copy": lambda: np.copyto(out, big)}
table = np.array([wall_times_ms(list(kernels.values()), steps) for _ in range(rounds)])
print(f"{rounds} rounds of {steps} calls, ms (25th percentiles per round)")
print("round " + "".join(f"{k:>10}" for k in kernels))
for r, row in enumerate(table, 1):
    print(f"{r:>5} " + "".join(f"{ms:>10.1f}" for ms in row))
spread = np.ptp(table, 0) / np.median(table, 0)
print("raw spread   " + "".join(f"{s:>10.1%}" for s in spread))
