"""The time model's validation table: `profiler.py --force --validate K` on every model of
docs/benchmarks/profiler.md's table (the registry models in both BatchNorm modes, two Keras applications
outside the registry with dense and branching connectivity, VGG16 and ViT), one after another.

    python -m bench.time_model [--validate 10] [--only mobilenetv2] --output results/bench_time_model.md

Each row profiles from scratch into a temporary folder (the study's profiles are left alone),
then times head-only, deepest-layer-only, full and K random selections and compares them with
the prediction: as profiled, with the live anchor exact-mode training applies from its second
selection, and re-anchored on this session's head, path and full steps. About 10 minutes on 2
cores; run it alone, the errors are only as good as the machine is quiet.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

from bench import publish_report
from utils import UserError, atomic_write_text, run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (row label, profiler flags): docs/benchmarks/profiler.md's table, "--bn_mode MODE" expanded
MODELS: List[Tuple[str, List[str]]] = [
    (f"{label} | {mode}", flags + ["--bn_mode", mode])
    for label, flags in [
        ("mobilenetv2 64 px / 32", ["--model_name", "mobilenetv2", "--input_size", "64", "--batch_size", "32"]),
        ("resnet50 32 px / 32", ["--model_name", "resnet50", "--input_size", "32", "--batch_size", "32"]),
        ("DenseNet121 64 px / 16 (dense)", ["--keras_application", "DenseNet121", "--input_size", "64",
                                            "--batch_size", "16"]),
        ("InceptionV3 75 px / 16 (branching)", ["--keras_application", "InceptionV3", "--input_size", "75",
                                                "--batch_size", "16"])]
    for mode in ("frozen", "train")] + [
    ("vgg16 64 px / 16 (no BatchNorm) | -", ["--model_name", "vgg16", "--input_size", "64", "--batch_size", "16"]),
    ("vit 64 px / 8, Adam (LayerNorm) | -", ["--model_name", "vit", "--input_size", "64", "--batch_size", "8",
                                             "--optimizer", "adam"])]

SUMMARIES = {  # what profiler.print_validation prints, by column
    "profiled": r"relative error of the saved profile: median ([\d.]+)%, max ([\d.]+)%",
    "live": r"relative error with the live anchor .*?: median ([\d.]+)%, max ([\d.]+)%",
    "re-anchored": r"relative error re-anchored .*?: median ([\d.]+)%, max ([\d.]+)%",
}
PROFILED = r"profiled \S+ in (\d+) s: T_fp ([\d.]+) ms, T_bp [\d.]+ ms, T_full ([\d.]+) ms"
GOAL_MEDIAN, GOAL_MAX = 5.0, 15.0


def parse_output(text: str) -> Dict[str, object]:
    """The figures of one profiler run's output (UserError if it printed no validation)."""
    row: Dict[str, object] = {}
    for column, pattern in SUMMARIES.items():
        found = re.search(pattern, text)
        if found:
            row[column] = (float(found.group(1)), float(found.group(2)))
    found = re.search(PROFILED, text)
    if "profiled" not in row or not found:
        raise UserError("the profiler printed no validation summary:\n" + "\n".join(text.splitlines()[-5:]))
    row.update(seconds=int(found.group(1)), T_fp=float(found.group(2)), T_full=float(found.group(3)))
    return row


def meets(pair: Optional[Tuple[float, float]]) -> str:
    if pair is None:
        return "-"
    return f"{pair[0]:.1f} % / {pair[1]:.1f} % " + ("(met)" if pair[0] <= GOAL_MEDIAN and pair[1] <= GOAL_MAX
                                                    else "(not met)")


def report(rows: Sequence[Tuple[str, Dict]]) -> str:
    lines = ["| model | BatchNorm | T_fp / T_full ms | profiling s | as profiled: median / max | "
             "live anchor: median / max | re-anchored: median / max |", "|---|---|---|---:|---|---|---|"]
    for label, row in rows:
        lines.append(f"| {label} | {row['T_fp']:.0f} / {row['T_full']:.0f} | {row['seconds']} | "
                     f"{meets(row.get('profiled'))} | {meets(row.get('live'))} | {meets(row.get('re-anchored'))} |")
    for column in ("profiled", "live"):
        met = sum(1 for _, row in rows if "(met)" in meets(row.get(column)))
        lines.append(f"\n{column}: the goal (median <= {GOAL_MEDIAN:g} %, max <= {GOAL_MAX:g} %) holds for "
                     f"{met} of {len(rows)}")
    return "\n".join(lines) + "\n"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--validate", type=int, default=10, help="random selections per model")
    parser.add_argument("--num_classes", type=int, default=64, help="classifier size of every model")
    parser.add_argument("--only", default="", help="run only the rows whose label contains this text")
    parser.add_argument("--logdir", default="logs/bench_time_model", help="each row's profiler output goes here")
    parser.add_argument("--output", help="also write the table (markdown) to this file")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    chosen = [(label, flags) for label, flags in MODELS if args.only in label]
    if not chosen:
        raise UserError(f"--only {args.only!r} matches no row; rows: " + "; ".join(label for label, _ in MODELS))
    os.makedirs(args.logdir, exist_ok=True)
    rows = []
    for index, (label, flags) in enumerate(chosen, 1):
        slug = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_")
        log = os.path.join(args.logdir, slug + ".log")
        print(f"[{index}/{len(chosen)}] {label} (log {log})", flush=True)
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="bench_time_model_") as scratch:
            command = [sys.executable, os.path.join(ROOT, "profiler.py"), *flags, "--num_classes",
                       str(args.num_classes), "--force", "--validate", str(args.validate),
                       "--output_dir", scratch, "--logdir", os.path.join(scratch, "trace")]
            done = subprocess.run(command, cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        atomic_write_text(log, done.stdout)
        if done.returncode:
            raise UserError(f"{label}: the profiler failed (exit {done.returncode}); see {log}")
        rows.append((label, parse_output(done.stdout)))
        print(f"    {time.perf_counter() - start:.0f} s; {meets(rows[-1][1].get('live'))} with the live anchor",
              flush=True)
    publish_report(report(rows), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
