"""Issue 63: two equality runs' TensorBoard values compared (every scalar, text and image but timing;
images decoded), with the tags issue 63 renamed mapped.
    python experiments/refactor_63/compare_tb.py LOGDIR_BEFORE LOGDIR_AFTER"""
import glob, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
TIMING = ("second", "_ms", "time", "peak", "mb", "joule", "energy", "wall", "achieved", "drift", "correction", "speed", "overhead", "compile", "live")
def scalars(run_dir):
    out = {}
    for f in sorted(glob.glob(os.path.join(run_dir, "**", "events.out.tfevents*"), recursive=True)):
        for e in tf.compat.v1.train.summary_iterator(f):
            for v in e.summary.value:
                if any(t in v.tag for t in TIMING) or v.tag.startswith("_hparams_"):
                    continue
                val = tf.make_ndarray(v.tensor) if v.HasField("tensor") else v.simple_value
                key = (os.path.dirname(os.path.relpath(f, run_dir)), v.tag, e.step)
                if hasattr(val, "dtype") and val.dtype == object:
                    items = [x for x in val.ravel()]
                    decoded = []
                    for x in items:
                        if x[:8] == b"\x89PNG\r\n\x1a\n":
                            decoded.append(tf.io.decode_png(x).numpy().tobytes())
                        else:
                            decoded.append(x)
                    out[key] = tuple(decoded)
                else:
                    out[key] = val.tobytes() if hasattr(val, "tobytes") else val
    return out
a, b = sys.argv[1], sys.argv[2]
RENAMED = {"elastic/selected_fraction": "selection/trained_fraction", "elastic/predicted_rho": "selection/predicted_ratio",
           "anchor/": "gain_stage/"}  # issue 63's scalar names (old -> new), applied to the old run's tags
def renamed(key):
    where, tag, step = key
    for old, new in RENAMED.items():
        tag = tag.replace(old, new)
    return (where, tag, step)
for run in ("elastic", "gain_stage", "traditional_tl"):
    sa, sb = {renamed(k): v for k, v in scalars(os.path.join(a, run)).items()}, scalars(os.path.join(b, run))
    diff = sorted({k[1] for k in set(sa) | set(sb) if sa.get(k) != sb.get(k)})
    print(f"{run}: {len(sa)} / {len(sb)} values (tags: {len({k[1] for k in sa})}); differing tags: {diff or 'none'}")
