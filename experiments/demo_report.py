"""The demo's closing report (scripts/run_demo.sh): each of its three runs as measured here, then what
the study measured for the same runs, with the README's verdict.

    python -m experiments.demo_report RUN_DIR... --labels LABEL... --task parts --epochs 12 --interval 4
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from typing import Dict, List, Optional, Sequence

# What the study measured for the demo's three runs on its task (3 seeds, final-epoch test accuracy; the
# README's Results and "Which scheme at a budget?" tables, from results/study/readme_results.md and
# results/deadline_64/frontier_<task>.md), valid for the demo's defaults only (12 epochs, interval 4).
STUDY = {
    "parts": ["full training, 12 epochs: 75.1 +- 1.5 %",
              "ElasticTrainer \"50 %\": 71.0 +- 1.0 % (paired -4.1 points [-9.3, +1.1]), 1.39-1.85x faster in training",
              "at 0.6 of full training's time (about ElasticTrainer's), full training with the zero head 68.4 % "
              "against ElasticTrainer's 69.5 %: embedded_parts is the one draw of four where a selective scheme led "
              "at a deadline"],
    "shapes": ["full training, 12 epochs: 85.2 +- 0.3 %",
               "ElasticTrainer \"50 %\": 75.8 +- 0.4 % (paired -9.4 points [-10.2, -8.6]), 1.56-1.94x faster in training",
               "at 0.6 of full training's time, full training with the zero head 83.8 % against ElasticTrainer's 76.0 %"],
}
VERDICT = ("The README's verdict (judged on two fresh draws at 0.6 of full training's time: full training led "
           "ElasticTrainer by 4.6 and 8.7 points): at a deadline, train every tensor, --train_type full_training "
           "--head_init zeros --time_budget T. Your profile and machine decide ElasticTrainer's selections and the "
           "deadline's steps, so one seed here can differ from the study's means by several points.")


def read_summary(run_dir: str) -> Dict:
    with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as handle:
        return json.load(handle)


def table(summaries: Sequence[Dict], labels: Sequence[str]) -> List[str]:
    """One line a run: final test accuracy, training seconds, epochs, the whole process's seconds."""
    width = max(len(label) for label in labels) + 2
    lines = [f"{'run':<{width}}{'final test %':>13}{'train s':>9}{'epochs':>8}{'process s':>11}"]
    for summary, label in zip(summaries, labels):
        epochs = (summary.get("deadline") or {}).get("epochs", len(summary.get("history", [])))
        process = summary.get("process_seconds")
        lines.append(f"{label:<{width}}{100 * summary['final_test_accuracy']:>13.2f}{summary['train_seconds']:>9.1f}"
                     f"{float(epochs):>8.2f}{(f'{process:.0f}' if process else '-'):>11}")
    return lines


def report(run_dirs: Sequence[str], labels: Sequence[str], task: str, epochs: int, interval: float) -> List[str]:
    summaries = [read_summary(run_dir) for run_dir in run_dirs]
    lines = ["", "This demo's runs (one seed, final-epoch test accuracy):"] + table(summaries, labels)
    if task in STUDY and epochs == 12 and interval == 4:
        lines += ["", f"The study's runs of these three on embedded_{task} (3 seeds, the same protocol):"]
        lines += [textwrap.fill(line, 100, initial_indent="  - ", subsequent_indent="    ") for line in STUDY[task]]
        lines += ["", textwrap.fill(VERDICT, 100)]
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="The demo's closing report.")
    parser.add_argument("runs", nargs="+", help="run folders with a summary.json")
    parser.add_argument("--labels", nargs="+", required=True, help="one label a run")
    parser.add_argument("--task", default="parts", help="the demo's task (parts or shapes)")
    parser.add_argument("--epochs", type=int, default=12, help="the demo's --num_epochs")
    parser.add_argument("--interval", type=float, default=4, help="the demo's --interval")
    args = parser.parse_args(argv)
    if len(args.labels) != len(args.runs):
        parser.error(f"--labels gives {len(args.labels)} labels for {len(args.runs)} runs")
    print("\n".join(report(args.runs, args.labels, args.task, args.epochs, args.interval)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
