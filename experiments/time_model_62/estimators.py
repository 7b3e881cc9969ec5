"""How steady is each estimator of a step's time, from k blocks of a samples.py record? (issue 62)

    python experiments/time_model_62/estimators.py OUT.json

For k blocks drawn at random from the record (as rounds spread over a profiling), 2,000 draws:
the relative spread (std over mean) of each estimator, of each step alone and of its ratio to
the full step measured in the same blocks.
"""
import json, sys
import numpy as np
record = json.load(open(sys.argv[1]))
times = np.array(record["times_ms"])  # functions x blocks x steps
names = record["names"]
functions, blocks, block = times.shape
rng = np.random.default_rng(0)
estimators = {
    "pooled 25th pct": lambda t: np.percentile(t.reshape(t.shape[0], -1), 25, axis=1),
    "pooled median": lambda t: np.median(t.reshape(t.shape[0], -1), axis=1),
    "pooled min": lambda t: t.reshape(t.shape[0], -1).min(axis=1),
    "median of block 25th pcts": lambda t: np.median(np.percentile(t, 25, axis=2), axis=1),
    "mean of block minima": lambda t: t.min(axis=2).mean(axis=1),
}
print(f"{record['model']} {record['size']} px / {record['batch']}: {blocks} blocks of {block} steps per function, "
      f"made {record['made']}")
for k in (3, 4, 8, 16):
    draws = [rng.choice(blocks, k, replace=False) for _ in range(2000)]
    print(f"\nk = {k} blocks ({k * block} steps per function): relative spread (std / mean) over draws, "
          "raw | over the same blocks' full step (median of the non-full functions)")
    for label, estimate in estimators.items():
        values = np.array([estimate(times[:, d, :]) for d in draws])  # draws x functions
        raw = values.std(0) / values.mean(0)
        ratio = values / values[:, [2]]
        rel = np.delete(ratio.std(0) / ratio.mean(0), 2)
        print(f"  {label:<28} raw median {np.median(raw):6.1%} (max {raw.max():6.1%})   ratio median "
              f"{np.median(rel):6.1%} (max {rel.max():6.1%})")
