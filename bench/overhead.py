"""Where an elastic run's wall time goes, against full training, on the offline study protocol.

Trains full training and ElasticTrainer back to back (one subprocess each, the study protocol of
experiments/study_plans.py: MobileNetV2, 64 px, frozen BatchNorm, the cached source backbone) and
prints the step-time ratio, the wall-time ratios and the overhead split: probe (importance
evaluation; the first one also compiles the probe), DP, compiling new selections' steps, and the
test evaluations (outside the training wall time, inside the process's).

    python -m bench.overhead [--rho 0.5] [--rho_mode exact] [--epochs 12] [--interval 4]

Needs the source backbone (bash scripts/make_source_backbone.sh mobilenetv2 64); about 8 minutes
on 2 cores at the defaults. Run it alone: the ratios are only as good as the machine is quiet.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import Dict, List

from experiments import runner, study_plans
from utils import publish_report, run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="mobilenetv2", choices=sorted(study_plans.PROTOCOLS),
                        help="study protocol to run (experiments/study_plans.py)")
    parser.add_argument("--rho", type=float, default=0.5, help="ElasticTrainer's rho")
    parser.add_argument("--rho_mode", default="exact", choices=study_plans.RHO_MODES, help="rho conversion")
    parser.add_argument("--epochs", type=int, default=12, help="epochs of each run (the study's 12)")
    parser.add_argument("--interval", type=float, default=4, help="epochs between re-selections (the study's 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of both runs")
    parser.add_argument("--logdir", default="logs/bench_overhead", help="where the two runs' logs go")
    parser.add_argument("--reuse", action="store_true",
                        help="report runs that already finished in --logdir instead of training again")
    parser.add_argument("--output", help="also write the report (markdown) to this file")
    return parser.parse_args(argv)


def runs(args: argparse.Namespace) -> List[runner.Job]:
    flags = study_plans.protocol_flags(args.model_name) + [
        "--weights", study_plans.PROTOCOLS[args.model_name]["weights"], "--num_epochs", str(args.epochs),
        "--interval", str(args.interval), "--seed", str(args.seed), "--logdir", args.logdir]
    elastic = f"elastic_training_rho{args.rho:g}_{args.rho_mode}"
    return [("full_training", flags + ["--train_type", "full_training", "--run_name", "full_training"]),
            (elastic, flags + ["--train_type", "elastic_training", "--rho", str(args.rho),
                               "--rho_mode", args.rho_mode, "--run_name", elastic])]


def overheads(summary: Dict) -> Dict[str, float]:
    """Seconds of each overhead of one run (probe, DP and compile inside its training time)."""
    parts = summary.get("selection_parts", {})
    return {"probe": parts.get("probe", 0.0) + parts.get("recalibrate", 0.0), "dp": parts.get("dp", 0.0),
            "compile": summary["compile_seconds"], "evaluation": summary["evaluation_seconds"]}


def report(full: Dict, elastic: Dict, process_seconds: Dict[str, float]) -> str:
    lines = ["| run | train s | process s | median step ms | probe s | DP s | compile s | evaluation s "
             "| probe + DP + compile, % of train s |", "|---|" + "---:|" * 8]
    for summary in (full, elastic):
        o = overheads(summary)
        inside = o["probe"] + o["dp"] + o["compile"]
        lines.append(f"| {summary['run_name']} | {summary['train_seconds']:.1f} | "
                     f"{process_seconds.get(summary['run_name'], float('nan')):.0f} | "
                     f"{summary['median_step_ms']:.1f} | {o['probe']:.2f} | {o['dp']:.3f} | {o['compile']:.2f} | "
                     f"{o['evaluation']:.1f} | {100 * inside / summary['train_seconds']:.1f} |")
    step_ratio = elastic["median_step_ms"] / full["median_step_ms"]
    wall_ratio = elastic["train_seconds"] / full["train_seconds"]
    lines += ["", f"step ratio (median steps, elastic / full): {step_ratio:.3f}"
              + (f"; live, final selection vs a full step timed together: {elastic['step_time_ratio_live']:.3f}"
                 if "reference_full_step_ms" in elastic else ""),
              f"wall-time ratio (training, evaluation excluded): {wall_ratio:.3f} ({1 / wall_ratio:.2f}x faster)"]
    if all(name in process_seconds for name in (full["run_name"], elastic["run_name"])):
        process_ratio = process_seconds[elastic["run_name"]] / process_seconds[full["run_name"]]
        lines.append(f"wall-time ratio (whole process: start-up, evaluations, live reference): "
                     f"{process_ratio:.3f} ({1 / process_ratio:.2f}x faster)")
    return "\n".join(lines)


def closed_loop(run_dir: str) -> str:
    """The elastic run's closed loop, from its TensorBoard events: at each re-selection, the
    achieved step time of the period that ended over the target, and the correction it left."""
    from experiments import plot

    run = plot.Run(run_dir)
    if "elastic/correction" not in run.tags:
        return ""
    achieved = dict(run.series("elastic/target_vs_achieved")) if "elastic/target_vs_achieved" in run.tags else {}
    drift = dict(run.series("elastic/drift")) if "elastic/drift" in run.tags else {}
    parts = [f"step {step}: correction {value:.3f}" + (f" (the period before ran at {achieved[step]:.3f} x target)"
                                                       if step in achieved else "")
             + (f", drift {drift[step]:.3f}" if step in drift else "")
             for step, value in run.series("elastic/correction")]
    return "closed loop at each selection: " + "; ".join(parts)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.logdir = os.path.abspath(args.logdir)  # the runs start in the repository's root
    jobs = runs(args)
    summaries, seconds = {}, {}
    for index, (name, flags) in enumerate(jobs):
        path = os.path.join(args.logdir, name, "summary.json")
        if args.reuse and os.path.exists(path):
            with open(path) as handle:
                summaries[name] = json.load(handle)
            print(f"[{index + 1}/2] {name}: reusing {path}", flush=True)
            continue
        study_plans.require_backbone(args.model_name, "the benchmark")
        print(f"[{index + 1}/2] {name}: training (log {os.path.join(args.logdir, name)}.log)", flush=True)
        shutil.rmtree(os.path.join(args.logdir, name), ignore_errors=True)  # timed whole, never resumed
        summaries[name], seconds[name] = runner.train_one(name, flags, args.logdir)
    text = report(summaries[jobs[0][0]], summaries[jobs[1][0]], seconds)
    loop = closed_loop(os.path.join(args.logdir, jobs[1][0]))
    text += "\n" + loop if loop else ""
    publish_report(text, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
