"""Does exact mode keep rho of *today's* full step when the profile is stale?

    python -m bench.drift --output results/bench_drift.md

A profile measured in a slow minute predicts every step too slow. This benchmark makes that
case on purpose: it profiles the study protocol's model afresh (into LOGDIR/profile; the
study's profile in profile_extracted/ is left alone), then writes a copy with every
time scaled by --scale (a profile taken while the machine ran that much slower), and trains
ElasticTrainer (exact mode, --rho) with
- fresh:             the fresh profile;
- stale:             the scaled copy (its probe-pass time T_grad_ms scaled too), so the run
                     re-anchors its target on the probe's full gradients timed live;
- stale, no anchor:  the scaled copy without T_grad_ms, as profiles made before the anchor:
                     the closed loop alone holds steps at rho times the *profiled* full step.
Each run's step ratio is its final selection timed against a full step after training
(interleaved, in the run's own process). A benchmark: it prints, it asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

from bench import publish_report
from elastic_trainer import profile_tables
from elastic_trainer.command_line import run_cli
from elastic_trainer.files import atomic_write_json
from experiments import plot
from experiments.study_plans import PROTOCOLS, profiler_arguments, protocol_flags, require_backbone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TIME_KEYS = ("T_fp_ms", "T_bp_ms", "T_full_ms", "T_head_ms", "T_path_ms", "T_grad_ms")


def scaled_profile(profile: Dict, scale: float, keep_anchor: bool) -> Dict:
    """The profile as if measured on a machine `scale` times slower (pure)."""
    slow = dict(profile, tensors=[dict(t, t_dw_ms=t["t_dw_ms"] * scale, t_dy_ms=t["t_dy_ms"] * scale)
                                  for t in profile["tensors"]])
    for key in TIME_KEYS:
        if key in slow:
            slow[key] = slow[key] * scale
    if "T_grad_chunks_ms" in slow:
        slow["T_grad_chunks_ms"] = {count: ms * scale for count, ms in slow["T_grad_chunks_ms"].items()}
    if not keep_anchor:
        slow.pop("T_grad_ms", None)
        slow.pop("T_grad_chunks_ms", None)
    return slow


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="mobilenetv2", help="a model with a study protocol")
    parser.add_argument("--rho", type=float, default=0.7, help="exact-mode rho of every run")
    parser.add_argument("--scale", type=float, default=1.15, help="how much slower the stale profile says steps are")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--num_epochs", type=int, default=6)
    parser.add_argument("--interval", type=float, default=2, help="epochs between selections")
    parser.add_argument("--logdir", default="logs/bench_drift")
    parser.add_argument("--output", default=None, help="markdown file for the table")
    args = parser.parse_args(argv)
    weights = require_backbone(args.model_name, "the drift benchmark")
    protocol, flags = PROTOCOLS[args.model_name], protocol_flags(args.model_name)
    python = sys.executable
    profiles = os.path.join(ROOT, args.logdir, "profile")  # the study's profile and figures are left alone
    os.makedirs(profiles, exist_ok=True)
    subprocess.run([python, os.path.join(ROOT, "profiler.py"), *profiler_arguments(args.model_name, protocol["bn_mode"]),
                    "--force", "--output_dir", profiles, "--logdir", os.path.join(profiles, "trace")],
                   cwd=profiles, check=True)
    fresh_path = os.path.join(profiles, profile_tables.profile_name(
        args.model_name, protocol["input_size"], protocol["num_classes"], protocol["batch_size"],
        protocol["bn_mode"]) + ".json")
    with open(fresh_path) as handle:
        fresh = json.load(handle)
    variants = {"fresh": ("fresh", fresh_path)}  # slug -> (name in the table, profile)
    for slug, name, keep in (("stale", "stale", True), ("stale_no_anchor", "stale, no anchor", False)):
        path = os.path.join(ROOT, args.logdir, slug + "_profile.json")
        atomic_write_json(path, scaled_profile(fresh, args.scale, keep))
        variants[slug] = (name, path)
    rows: List[str] = []
    for slug, (name, path) in variants.items():
        ratios, drifts = [], []
        for seed in args.seeds:
            run = f"{slug}_s{seed}"
            command = [python, "main.py", *flags, "--weights", weights, "--train_type", "elastic_training",
                       "--rho", str(args.rho), "--rho_mode", "exact", "--num_epochs", str(args.num_epochs),
                       "--interval", str(args.interval), "--seed", str(seed), "--profile", path,
                       "--logdir", args.logdir, "--run_name", run]
            print("$", " ".join(command[1:]), flush=True)
            run_dir = os.path.join(ROOT, args.logdir, run)
            shutil.rmtree(run_dir, ignore_errors=True)  # an earlier attempt: start again, not beside it
            subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(run_dir, "summary.json")) as handle:
                ratios.append(json.load(handle)["step_time_ratio_live"])
            events = plot.Run(run_dir)
            drifts.append(events.series("elastic/drift")[-1][1] if "elastic/drift" in events.tags else float("nan"))
        rows.append(f"| {name} | {len(ratios)} | {statistics.fmean(ratios):.3f} ± {statistics.stdev(ratios) if len(ratios) > 1 else 0.0:.3f} | "
                    f"{', '.join(f'{r:.3f}' for r in ratios)} | {', '.join(f'{d:.3f}' for d in drifts)} |")
    table = "\n".join([f"ElasticTrainer, exact mode, rho {args.rho}, {args.num_epochs} epochs, a selection every "
                       f"{args.interval:g}; stale profiles are the fresh one x {args.scale}", "",
                       "| profile | seeds | step ratio (live, mean ± std) | per seed | drift at the end |",
                       "|---|---:|---:|---|---|", *rows]) + "\n"
    publish_report(table, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
