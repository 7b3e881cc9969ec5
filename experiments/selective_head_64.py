"""Issue 64's open caveat, measured on the design draws' validation: does `--head_init zeros` lift the
selective schemes at a deadline as it lifted full training? (The rule: results/deadline_64/README.md,
"The caveat measured", written before any run.)

    python experiments/selective_head_64.py run [--dry_run]   # ~40 min on 2 cores, resumes
    python experiments/selective_head_64.py table             # results/deadline_64/selective_head.md

ElasticTrainer "50 %" and gain_stage_training "50 %", each with the glorot and the zero head, at 0.6 of
full training's 12-epoch time on parts and shapes (the frontier's budgets), seeds 0-2, one batch.
"""
import argparse
import datetime
import os
import sys

sys.path.insert(0, os.getcwd())
import tf_environment  # noqa: E402,F401

import numpy as np  # noqa: E402

from experiments import study_deadline as plan  # noqa: E402
from experiments.sharding import host_name  # noqa: E402
from experiments.study_stats import mean_std, plus_minus  # noqa: E402

OUT = os.path.join(plan.RESULTS, "selective_head")
TASKS, FRACTION, MARGIN = ("parts", "shapes"), 0.6, 0.005
ROWS = [(f"{scheme} {head}", flags + (["--head_init", "zeros"] if head == "zero" else []))
        for scheme, flags in plan.SCHEMES if scheme in ("elastic_training 50 %", "gain_stage_training 50 %")
        for head in ("glorot", "zero")]


def jobs(task):
    budget = round(FRACTION * plan.full_seconds(plan.RESULTS, task), 1)
    log_root = os.path.join(plan.LOGS, "selective_head", task)
    return [(name, plan.base_flags(task, seed, log_root, name) + flags + ["--time_budget", f"{budget}s"])
            for seed in plan.SEEDS for row, flags in ROWS for name in [f"{plan.slug(row)}_s{seed}"]]


def table():
    lines = ["# Does the zero head lift the selective schemes at a deadline? (issue 64's caveat)", "",
             "Rule: results/deadline_64/README.md, \"The caveat measured\", written before any run. Budget: 0.6 of full "
             "training's 12-epoch time on each design draw; seeds 0-2; last-epoch validation accuracy decides, "
             "final-epoch test accuracy is shown beside.", "",
             "| draw | scheme, head | runs | last-epoch val acc % | final test acc % | spent share | epochs |",
             "|---|---|---:|---:|---:|---:|---:|"]
    pooled = {row: [] for row, _ in ROWS}
    for task in TASKS:
        runs = plan.finished(OUT, task)
        for row, _ in ROWS:
            got = [runs[f"{plan.slug(row)}_s{seed}"] for seed in plan.SEEDS if f"{plan.slug(row)}_s{seed}" in runs]
            pooled[row] += [run["history"][-1]["val_accuracy"] for run in got]
            if got:
                shares = [run["deadline"]["spent_share"] for run in got]
                lines.append(f"| {task} | {row} | {len(got)} | "
                             f"{plus_minus(mean_std([r['history'][-1]['val_accuracy'] for r in got]), 100)} | "
                             f"{plus_minus(mean_std([r['final_test_accuracy'] for r in got]), 100)} | "
                             f"{min(shares):.3f}-{max(shares):.3f} | "
                             f"{np.mean([r['deadline']['epochs'] for r in got]):.2f} |")
    lines += ["", "The rule's reading (mean over both draws and seeds, zero head minus glorot):"]
    for glorot, zero in zip([r for r, _ in ROWS][::2], [r for r, _ in ROWS][1::2]):
        if len(pooled[glorot]) < 6 or len(pooled[zero]) < 6:
            lines.append(f"- {zero.rsplit(' ', 1)[0]}: waiting for its runs ({len(pooled[glorot])} and {len(pooled[zero])} of 6)")
            continue
        difference = np.mean(pooled[zero]) - np.mean(pooled[glorot])
        verdict = "lifts it" if difference > MARGIN else "does not lift it"
        lines.append(f"- {zero.rsplit(' ', 1)[0]}: {100 * np.mean(pooled[glorot]):.2f} -> {100 * np.mean(pooled[zero]):.2f} %, "
                     f"{100 * difference:+.2f} points: the zero head **{verdict}**")
    lines += ["", "Per-run records: results/deadline_64/selective_head/<task>/runs/ (each run's summary.json).",
              "", f"Made by `python experiments/selective_head_64.py run`, then `table`; the table at {plan.commit()} on "
              f"{host_name()}, {datetime.date.today()}. The runs' code:",
              *plan.provenance({f"{task}/{name}": run for task in TASKS for name, run in plan.finished(OUT, task).items()})]
    plan.publish(lines, os.path.join(plan.RESULTS, "selective_head.md"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("run", "table"))
    parser.add_argument("--dry_run", action="store_true", help="print the commands, train nothing")
    args = parser.parse_args()
    if args.action == "run":
        for task in TASKS:
            plan.train(jobs(task), OUT, task, os.path.join(plan.LOGS, "selective_head", task), args.dry_run)
    table()


if __name__ == "__main__":
    main()
