"""results/fresh_validation/runs.jsonl from the runs' logs in $OUT (run.sh's tags). Run from the repository root."""
import json, glob, os, sys
sys.path.insert(0, os.getcwd())
import utils
OUT = os.environ.get("OUT", "/tmp/fv/out")
VARIANTS = {
    "auto": ("78d1cd2", "glorot", "ImageFolder's unseeded file shuffle (as committed); every step's (image, label) checked against the files (experiments/fresh_validation/check_run.py)"),
    "old_off": ("78d1cd2", "glorot", "ImageFolder not asked to shuffle its files (VARIANT=off)"),
    "old_dummy": ("78d1cd2", "glorot", "not asked to shuffle; an unseeded shuffle op built in its place (VARIANT=dummy)"),
    "old_seeded": ("78d1cd2", "glorot", "the file shuffle seeded 123 (VARIANT=seeded)"),
    "old_zeros_s0": ("78d1cd2", "zeros", "the committed (failing) order, zero classifier (HEAD=zeros)"),
}
for s in range(1, 7):
    VARIANTS[f"old_seeded{s}"] = ("78d1cd2", "glorot", f"the file shuffle seeded {s} (VARIANT=seeded SHUFFLE_SEED={s})")
for s in range(6):
    VARIANTS[f"new_random_s{s}"] = ("b3f78d4", "glorot", "as committed")
    VARIANTS[f"new_zeros_s{s}"] = ("b3f78d4", "zeros", "zero classifier (HEAD=zeros, what --head_init zeros does)")
for s in range(1, 6):
    VARIANTS[f"new_carved_s{s}"] = ("b3f78d4", "glorot", "as committed, --validation carved")
lines = []
for tag, (code, head, what) in VARIANTS.items():
    path = glob.glob(f"{OUT}/logs_{tag}/*/summary.json")[0]
    s = json.load(open(path))
    losses = [round(h["train_loss"], 4) for h in s["history"]]
    fired = [i for i, l in enumerate(losses, 1) if utils.at_chance(l, 20, i, 12)]
    lines.append(json.dumps({"run": tag, "code": code, "classifier": head, "variant": what,
                             "seed": s["seed"], "validation": s["config"]["validation"],
                             "final_test_accuracy": round(100 * s["final_test_accuracy"], 2),
                             "train_loss": losses, "val_accuracy": [round(100 * h["val_accuracy"], 2) for h in s["history"]],
                             "at_chance_warning_epoch": fired[0] if fired else None,
                             "train_seconds": round(s["train_seconds"], 1), "provenance": s["provenance"]}))
    print(tag, s["seed"], round(100 * s["final_test_accuracy"], 2), fired[:1], losses[3])
utils.atomic_write_text("results/fresh_validation/runs.jsonl", "\n".join(lines) + "\n")
