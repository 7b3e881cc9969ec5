"""Profile a model, then time many selections; save their time-model features and measured steps."""
import sys, os, json, time
sys.path.insert(0, os.getcwd())
import tf_environment  # noqa
import numpy as np, tensorflow as tf
import models, profiler, profile_tables
from train_step import TrainStep, shared_forward, make_optimizer
from measure import wall_times_ms
name, size, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tf.keras.utils.set_random_seed(0)
if name in models.MODELS:
    model = models.build_model(name, 64, size, "none", "frozen")
else:
    model = models.build_keras_application(name, 64, size, "frozen")
t0 = time.perf_counter()
profile = profiler.profile_model(model, batch, meta={"model_name": name, "input_size": size, "num_classes": 64})
profile_s = time.perf_counter() - t0
points = profiler.tensor_points(model)
n = len(points)
t_dw = np.array([t["t_dw_ms"] for t in profile["tensors"]]); t_dy = np.array([t["t_dy_ms"] for t in profile["tensors"]])
raw_dw, raw_dy = t_dw / profile["dw_scale"], t_dy / profile["dy_scale"]
as_mask = lambda idx: np.isin(np.arange(n), idx).astype(np.uint8)
sel = [("head", as_mask(profile_tables.point_tensors(points, -1))), ("path", as_mask(profile_tables.point_tensors(points, 0))),
       ("full", np.ones(n, np.uint8))]
rng = np.random.default_rng(1)
sel += [(f"random {i}", m) for i, m in enumerate(profiler._random_masks(points, 16, rng))]
head = sel[0][1]
for frac in (0.1, 0.3, 0.5, 0.7, 0.9):  # a deep tensor's point and the head, nothing between
    k = int(frac * (n - 1)); m = head.copy(); m[profile_tables.point_tensors(points, k)] = 1
    sel.append((f"deep {frac}", m))
for share in (0.25, 0.5, 0.75):
    sel.append((f"top {share}", profiler.top_mask(points, share)))
setup = make_optimizer("sgd", 1e-4, 5e-4, 1000)
images, labels = profiler.random_batch(model, batch, 0)
forward = shared_forward(model)
steps = [TrainStep(model, setup.optimizer, [w for w, k in zip(model.trainable_weights, m) if k], forward=forward) for _, m in sel]
for _ in range(5):
    for s in steps: s(images, labels)[0].numpy()
measured = wall_times_ms([lambda s=s: s(images, labels)[0].numpy() for s in steps], 20)
rows = []
for (label, m), ms in zip(sel, measured):
    idx = np.flatnonzero(m); deepest = int(idx.min())
    dw, dy = profile_tables.time_parts(raw_dw, raw_dy, idx)
    crossed = len(set(p for p in points if p > points[deepest]))
    pred = profile["T_fp_ms"] + sum(t_dw[idx]) + sum(t_dy[deepest + 1:])
    rows.append(dict(label=label, tensors=int(m.sum()), deepest=deepest, crossed=crossed, dw=dw, dy=dy,
                     measured=ms, predicted=pred, error=(pred - ms) / ms))
    print(f"{label:12s} n={int(m.sum()):4d} deepest={deepest:4d} crossed={crossed:4d} meas={ms:7.1f} pred={pred:7.1f} err={100*(pred-ms)/ms:+6.1f}%", flush=True)
errs = [abs(r["error"]) for r in rows if r["label"].startswith(("random", "deep"))]
print(f"profiled in {profile_s:.0f} s; median {100*np.median(errs):.1f}% max {100*max(errs):.1f}% (random+deep)")
json.dump(dict(model=name, size=size, batch=batch, profile_seconds=profile_s, T_fp=profile["T_fp_ms"], T_full=profile["T_full_ms"],
               dw_scale=profile["dw_scale"], dy_scale=profile["dy_scale"], n=n, rows=rows), open(out, "w"), indent=1)
