"""Issue 63: every committed study run of a scheme this checkout has replays through --config (one run
per scheme and dataset). Run from a checkout: PYTHONPATH=. python experiments/refactor_63/replay.py"""
import glob, json, os, random, sys, tempfile
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import cli
from utils import UserError
files = sorted(glob.glob("results/study/**/*.json", recursive=True))
random.seed(0)
ok = bad = skipped = 0
seen = set()
for f in files:
    d = json.load(open(f))
    config = d.get("config") if isinstance(d, dict) else None
    if not isinstance(config, dict) or "train_type" not in config:
        skipped += 1; continue
    key = (config.get("train_type"), config.get("dataset_name"))
    if key in seen: continue
    seen.add(key)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json"); json.dump(config, open(path, "w"))
        try:
            resolved = cli.resolve_config(cli.parse_args(["--config", path, "--logdir", tmp]))
            ok += 1
        except (UserError, SystemExit) as e:
            bad += 1; print("refused:", f, key, str(e)[:200])
print(f"replayed {ok}, refused {bad}, distinct (scheme, dataset) of {len(files)} files; skipped {skipped}")
