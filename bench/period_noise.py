"""How steady is this machine from one period to the next? Read from finished runs, no training.

    python -m bench.period_noise [results/study ...] [--epochs_per_period 4] [--output FILE]

A run with a fixed selection (full training, the baselines, block ranges: every scheme but the
elastic ones) does the same work every epoch, so the ratio of one period's mean epoch time to
the previous period's is the machine's own drift, nothing else. The closed loop's correction
after the first period, and any wall-time ratio of two runs, cannot be steadier than this.
Periods follow ElasticTrainer's re-selection interval (4 epochs in the study); the first
period leaves out epoch 1 (it compiles). Prints, per results folder, how many of those ratios
fall within 0.95-1.05 and their spread, and how many epochs lasted one of tf.data's autotuning
stall lengths (5.12 s, 10.24 s, ...; see docs/benchmarks/wall_clock.md), which inflate the
spread of folders recorded while tf.data autotuned its parallelism. Reads each summary's per-epoch `history`.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import Dict, List, Tuple

import numpy as np

from bench import publish_report
from elastic_trainer.command_line import positive_int

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STALL_SECONDS = (5.12, 10.24, 20.48, 40.96, 81.92)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("folders", nargs="*", default=[os.path.join(ROOT, "results", "study")],
                        help="folders searched (recursively) for run summaries (*.json with a history)")
    parser.add_argument("--epochs_per_period", type=positive_int, default=4, help="epochs per period")
    parser.add_argument("--output", help="also write the report (markdown) to this file")
    return parser.parse_args(argv)


def period_ratios(history: List[Dict], epochs_per_period: int) -> List[float]:
    """Mean epoch time of each period over the previous period's (epoch 1 left out)."""
    ends = [0.0] + [float(h["train_seconds"]) for h in history]
    epochs = np.diff(ends)
    periods = [epochs[max(start, 1):start + epochs_per_period]
               for start in range(0, len(epochs) - epochs_per_period + 1, epochs_per_period)]
    means = [float(np.mean(p)) for p in periods if len(p)]
    return [later / earlier for earlier, later in zip(means, means[1:])]


def stalled_epochs(history: List[Dict]) -> int:
    ends = [0.0] + [float(h["train_seconds"]) for h in history]
    return int(sum(np.any(np.isclose(e, STALL_SECONDS, atol=0.1)) for e in np.diff(ends)))


def fixed_workload_runs(folder: str) -> List[Tuple[str, Dict]]:
    """(path, summary) of every finished run in `folder` whose selection never changes."""
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.json"), recursive=True)):
        try:
            with open(path) as handle:
                summary = json.load(handle)
        except (OSError, ValueError):
            continue
        if (isinstance(summary, dict) and summary.get("history") and "train_type" in summary
                and not str(summary["train_type"]).startswith("elastic")):
            runs.append((path, summary))
    return runs


def report(folders: List[str], epochs_per_period: int) -> str:
    lines = [f"| results | runs | period ratios | within 0.95-1.05 | 5th / 50th / 95th percentile | stalled epochs |",
             "|---|---:|---:|---:|---|---:|"]
    for top in folders:
        groups: Dict[str, List[Tuple[str, Dict]]] = {}
        for path, summary in fixed_workload_runs(top):
            groups.setdefault(os.path.relpath(os.path.dirname(path), top), []).append((path, summary))
        for group, runs in sorted(groups.items()):
            ratios = np.array([r for _, s in runs for r in period_ratios(s["history"], epochs_per_period)])
            if not len(ratios):
                continue
            low, mid, high = np.percentile(ratios, [5, 50, 95])
            within = float(np.mean(np.abs(ratios - 1) <= 0.05))
            stalls = sum(stalled_epochs(s["history"]) for _, s in runs)
            lines.append(f"| {group} | {len(runs)} | {len(ratios)} | {within:.0%} | {low:.3f} / {mid:.3f} / {high:.3f} "
                         f"| {stalls} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    missing = [f for f in args.folders if not os.path.isdir(f)]
    if missing:
        sys.exit(f"error: no such folder: {', '.join(missing)}")
    publish_report(report(args.folders, args.epochs_per_period), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
