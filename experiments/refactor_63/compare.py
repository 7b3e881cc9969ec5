"""Issue 63: two equality runs' summaries compared (experiments/refactor_63/equal.sh): configs, every
summary key but timing, and each epoch's loss and accuracies.
    python experiments/refactor_63/compare.py LOGDIR_BEFORE LOGDIR_AFTER"""
import json, sys, os
a, b = sys.argv[1], sys.argv[2]
keys = ["final_test_accuracy", "best_val_accuracy", "best_val_epoch", "test_accuracy_at_best_val", "steps", "selections"]
for run in ("elastic", "gain_stage", "traditional_tl"):
    sa = json.load(open(os.path.join(a, run, "summary.json"))); sb = json.load(open(os.path.join(b, run, "summary.json")))
    ca = json.load(open(os.path.join(a, run, "config.json"))); cb = json.load(open(os.path.join(b, run, "config.json")))
    same_cfg = {k: v for k, v in ca.items() if k != "logdir"} == {k: v for k, v in cb.items() if k != "logdir"}
    diffs = []
    for k in sorted(set(sa) | set(sb)):
        if any(t in k for t in ("second", "hours", "_ms", "time", "peak", "share", "provenance", "startup", "config", "energy", "joule", "live", "ratio_achieved", "overhead", "mb", "probe", "parts")):
            continue
        if sa.get(k) != sb.get(k):
            diffs.append(k)
    print(run, "config same:", same_cfg, "| differing non-timing keys:", diffs or "none",
          "| final test", sa["final_test_accuracy"], sb["final_test_accuracy"])
print("-- history, every key but wall times:")
for run in ("elastic", "gain_stage", "traditional_tl"):
    ha = json.load(open(os.path.join(a, run, "summary.json")))["history"]; hb = json.load(open(os.path.join(b, run, "summary.json")))["history"]
    bad = set()
    for ea, eb in zip(ha, hb):
        for k in set(ea) | set(eb):
            if any(t in k for t in ("second", "_ms", "time", "peak", "mb", "joule", "energy", "ratio_achieved", "wall")):
                continue
            if ea.get(k) != eb.get(k):
                bad.add(k)
    print(run, len(ha), len(hb), "differing:", sorted(bad) or "none", "| keys compared:", sorted(k for k in ha[0] if not any(t in k for t in ("second", "_ms", "time", "peak", "mb", "joule", "energy", "ratio_achieved", "wall"))))
