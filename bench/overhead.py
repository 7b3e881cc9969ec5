"""Where a run's wall time goes, full training against the selective schemes, on a study protocol.

Trains the chosen configs back to back for each seed (one subprocess each, so every process pays
its own start-up; the study protocol of experiments/study_plans.py with its cached source
backbone) and prints, from their summaries and the processes' own wall times:

1. per seed: accuracy (final epoch, and at the validation-best epoch), training and whole-process
   seconds, and each config's speedups over full training of the same seed (training time, the
   tables' "speedup"; whole process, what the user waits for);
2. the cost breakdown (mean over seeds): start-up (imports, model, profile check, data, the loop's
   setup), training steps, each selection's parts (tracing the probe, the probe's passes with
   snapshot, restore and host copies, the live anchor, the DP) for the first selection and the
   later ones, in seconds and in full steps, compiling new selections' steps, evaluation per
   epoch and the final test, checkpoints, the final reference timing, and what is left.

    python -m bench.overhead                                  # parts_mobilenetv2, seed 0
    python -m bench.overhead --seeds 0 1 2 --output results/bench_overhead.md
    python -m bench.overhead --model_name resnet50 --configs full_training elastic_training

Needs the protocol's source backbone (bash scripts/make_source_backbone.sh mobilenetv2 64 parts)
and profile (python profiler.py ...; the error says which). About 2 minutes a seed at the
defaults on 2 cores. Run it alone: the ratios are only as good as the machine is quiet. Summaries
from older code lack some parts; those cells read "-".
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
from typing import Dict, List, Sequence

from experiments import runner, study_plans

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from bench import publish_report
from elastic_trainer.command_line import run_cli

REFERENCE = "full_training"
SELECTIVE = ("elastic_training", "static_top_training")
STARTUP_PARTS = ("imports", "model", "profile", "data", "loop")
SELECTION_PARTS = ("probe_trace", "probe_calls", "probe", "anchor", "dp", "analysis", "recalibrate")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="parts_mobilenetv2", choices=sorted(study_plans.PROTOCOLS),
                        help="study protocol to run (experiments/study_plans.py)")
    parser.add_argument("--configs", nargs="+", default=[REFERENCE, *SELECTIVE],
                        choices=[REFERENCE, *SELECTIVE], help="schemes to run; full_training is the reference")
    parser.add_argument("--rho", type=float, default=0.533, help="the selective schemes' rho (the paper's '50 %%')")
    parser.add_argument("--rho_mode", default="paper", choices=study_plans.RHO_MODES, help="rho conversion")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds; each seed's configs run back to back")
    parser.add_argument("--epochs", type=int, default=12, help="epochs of each run (the study's 12)")
    parser.add_argument("--interval", type=float, default=4, help="epochs between re-selections (the study's 4)")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                        help="main.py flags added to every run (last on the line), e.g. --extra --test_every_epoch")
    parser.add_argument("--logdir", default="logs/bench_overhead", help="where the runs' logs go")
    parser.add_argument("--reuse", action="store_true",
                        help="report runs that already finished in --logdir instead of training again")
    parser.add_argument("--output", help="also write the report (markdown) to this file")
    args = parser.parse_args(argv)
    if REFERENCE not in args.configs:
        parser.error("--configs must include full_training: every ratio is against it")
    return args


def run_name(config: str, args: argparse.Namespace, seed: int) -> str:
    budget = f"_rho{args.rho:g}_{args.rho_mode}" if config != REFERENCE else ""
    return f"{config}{budget}_s{seed}"


def jobs(args: argparse.Namespace) -> List[runner.Job]:
    """Seed by seed, each seed's configs back to back."""
    base = study_plans.protocol_flags(args.model_name) + [
        "--weights", study_plans.PROTOCOLS[args.model_name]["weights"], "--num_epochs", str(args.epochs),
        "--interval", str(args.interval), "--logdir", args.logdir]
    planned = []
    for seed in args.seeds:
        for config in args.configs:
            name = run_name(config, args, seed)
            budget = ["--rho", str(args.rho), "--rho_mode", args.rho_mode] if config != REFERENCE else []
            planned.append((name, base + ["--train_type", config, *budget, "--seed", str(seed), "--run_name", name,
                                          *args.extra]))
    return planned


def number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and value is not None else float("nan")


def selection_costs(summary: Dict) -> Dict[str, Dict[str, float]]:
    """The first selection's seconds by part, the later ones' mean, and the costliest ({} for a
    fixed selection)."""
    each = summary.get("selection_parts_each")
    seconds = summary.get("selection_seconds") or []
    if not seconds:
        return {}
    if each is None:  # older summaries: totals only
        each = [{} for _ in seconds]
    rows = [{"total": total, **parts} for total, parts in zip(seconds, each)]
    later = rows[1:]
    mean_later = ({key: statistics.fmean(row.get(key, 0.0) for row in later) for key in set().union(*later)}
                  if later else {})
    return {"first": rows[0], "later": mean_later, "costliest": max(rows, key=lambda row: row["total"])}


def profiled_gradient_s(summary: Dict) -> float:
    """The profile's time of one traced full-gradient call (T_grad_ms), in seconds: the cheapest a
    selection's gradient pass runs on this device (nan without it)."""
    path = (summary.get("config") or {}).get("profile")
    if not path:
        return float("nan")
    try:
        with open(path if os.path.isabs(path) else os.path.join(ROOT, path)) as handle:
            return float(json.load(handle).get("T_grad_ms", float("nan"))) / 1000
    except (OSError, ValueError):
        return float("nan")


def breakdown(summary: Dict, process_seconds: float) -> Dict[str, float]:
    """One run's wall time by part (seconds; nan where its summary lacks the part)."""
    startup = summary.get("startup_parts") or {}
    selections = sum(summary.get("selection_seconds") or [])
    compile_s = number(summary.get("compile_seconds"))
    parts = {"process (measured around main.py)": process_seconds,
             "start-up": number(summary.get("startup_seconds")),
             **{f"  {name}": number(startup.get(name)) for name in STARTUP_PARTS},
             "training (the tables' wall time)": number(summary.get("train_seconds")),
             "  steps and data": number(summary.get("train_seconds")) - selections - compile_s,
             "  selections": selections,
             "  compiling steps (each selection's first call)": compile_s,
             "evaluation each epoch": number(summary.get("evaluation_seconds")),
             "final test": number(summary.get("final_test_seconds", 0.0 if summary.get("test_every_epoch", True) else None)),
             "checkpoints": number(summary.get("checkpoint_seconds")),
             "reference timing": number(summary.get("reference_seconds", 0.0))}
    accounted = ["start-up", "training (the tables' wall time)", "evaluation each epoch", "final test", "checkpoints",
                 "reference timing"]
    parts["rest (python start, summary, report)"] = process_seconds - sum(parts[name] for name in accounted)
    return parts


def mean(values: Sequence[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.fmean(values) if values else float("nan")


def cell(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def report(records: Dict[str, Dict], args: argparse.Namespace) -> str:
    """records: run name -> {"summary", "seconds"} for every planned run."""
    configs, seeds = args.configs, args.seeds
    lines = ["| seed | config | final test acc % | test acc % at val-best epoch | train s | process s | "
             "median step ms | step / full's | training speedup | whole-process speedup |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    speedups: Dict[str, List[tuple]] = {config: [] for config in configs}
    for seed in seeds:
        full = records[run_name(REFERENCE, args, seed)]
        for config in configs:
            record = records[run_name(config, args, seed)]
            summary, seconds = record["summary"], record["seconds"]
            train_speedup = full["summary"]["train_seconds"] / summary["train_seconds"]
            process_speedup = full["seconds"] / seconds
            speedups[config].append((train_speedup, process_speedup))
            selected = summary.get("test_accuracy_at_best_val")
            lines.append(f"| {seed} | {config} | {100 * summary['final_test_accuracy']:.1f} | "
                         f"{cell(100 * number(selected), 1)} | {summary['train_seconds']:.1f} | {seconds:.1f} | "
                         f"{summary['median_step_ms']:.1f} | "
                         f"{summary['median_step_ms'] / full['summary']['median_step_ms']:.3f} | "
                         f"{train_speedup:.2f}x | {process_speedup:.2f}x |")
    lines += ["", "Cost breakdown, seconds (mean over seeds " + ", ".join(map(str, seeds)) + "):", "",
              "| part | " + " | ".join(configs) + " |", "|---|" + "---:|" * len(configs)]
    tables = {config: [breakdown(records[run_name(config, args, seed)]["summary"],
                                 records[run_name(config, args, seed)]["seconds"]) for seed in seeds]
              for config in configs}
    for part in tables[configs[0]][0]:
        lines.append(f"| {part} | " + " | ".join(cell(mean([table[part] for table in tables[config]]))
                                                 for config in configs) + " |")
    full_step_s = mean([records[run_name(REFERENCE, args, seed)]["summary"]["median_step_ms"] / 1000 for seed in seeds])
    selection_lines = []
    for config in configs:
        costs = [selection_costs(records[run_name(config, args, seed)]["summary"]) for seed in seeds]
        costs = [c for c in costs if c]
        passes = mean([2 * profiled_gradient_s(records[run_name(config, args, seed)]["summary"]) for seed in seeds])
        for which in ("first", "later", "costliest"):
            rows = [c[which] for c in costs if c.get(which)]
            if not rows:
                continue
            total = mean([row["total"] for row in rows])
            split = ", ".join(f"{part} {mean([row.get(part, 0.0) for row in rows]):.3f}"
                              for part in SELECTION_PARTS if any(part in row for row in rows))
            selection_lines.append(f"| {config} | {which} | {total:.3f} | {total / full_step_s:.1f} | "
                                   f"{cell((total - passes) / full_step_s, 1)} | {split or '-'} |")
    if selection_lines:
        lines += ["", f"Selections (a full step: {1000 * full_step_s:.0f} ms, full training's median; beyond two "
                      f"passes: the selection less two full-gradient calls at the profile's traced time, T_grad_ms):",
                  "", "| config | selection | seconds | full steps | beyond two passes, full steps | parts, s |",
                  "|---|---|---:|---:|---:|---|", *selection_lines]
    lines.append("")
    for config in configs:
        if config == REFERENCE:
            continue
        pairs = speedups[config]
        lines.append(f"{config}: training speedup " + ", ".join(f"{t:.2f}x" for t, _ in pairs)
                     + "; whole-process speedup " + ", ".join(f"{p:.2f}x" for _, p in pairs)
                     + f" (seeds {', '.join(map(str, seeds))})")
    provenance = {str(records[name]["summary"].get("provenance", {}).get("code_commit")) for name in records}
    lines.append(f"code: {', '.join(sorted(provenance))}; extra flags: {' '.join(args.extra) or 'none'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.logdir = os.path.abspath(args.logdir)  # the runs start in the repository's root
    planned = jobs(args)
    records: Dict[str, Dict] = {}
    seconds_path = os.path.join(args.logdir, "process_seconds.json")
    known: Dict[str, float] = {}
    if args.reuse and os.path.exists(seconds_path):
        with open(seconds_path) as handle:
            known = json.load(handle)
    for index, (name, flags) in enumerate(planned):
        path = os.path.join(args.logdir, name, "summary.json")
        if args.reuse and os.path.exists(path) and name in known:
            with open(path) as handle:
                records[name] = {"summary": json.load(handle), "seconds": known[name]}
            print(f"[{index + 1}/{len(planned)}] {name}: reusing {path}", flush=True)
            continue
        study_plans.require_backbone(args.model_name, "the benchmark")
        print(f"[{index + 1}/{len(planned)}] {name}: training (log {os.path.join(args.logdir, name)}.log)", flush=True)
        shutil.rmtree(os.path.join(args.logdir, name), ignore_errors=True)  # timed whole, never resumed
        summary, seconds = runner.train_one(name, flags, args.logdir)
        records[name] = {"summary": summary, "seconds": seconds}
        known[name] = seconds
        os.makedirs(args.logdir, exist_ok=True)
        with open(seconds_path, "w") as handle:
            json.dump(known, handle, indent=1)
    publish_report(report(records, args), args.output, runs=records)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
