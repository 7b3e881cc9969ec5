"""Summaries of a study's runs: the claims table (mean ± std over seeds) and its figure.

Pure functions over the run summaries that scripts/study.py keeps in results/; only
`write_table` touches files.
"""
from __future__ import annotations

import glob
import json
import os
import re
import statistics
from typing import Callable, Dict, List, Optional, Sequence

from elastic_trainer.command_line import UserError
from elastic_trainer.files import atomic_path, atomic_write_text
from elastic_trainer.run_summary import overhead_share
from experiments.study_stats import mean_std, plus_minus

# The paper's figures (ResNet50, CUB-200, ImageNet weights, Jetson TX2; docs/paper.md, Fig. 17), by the
# config names of the study: accuracy % and speedup over full training in wall time.
PAPER = {
    "full_training": (69.0, 1.0),
    "traditional_tl_training": (42.9, 2.94 / 0.68),
    "bn_plus_bias_training": (57.5, 2.94 / 1.77),
    "prune_training": (69.2, 2.94 / 2.79),
    "elastic_training_rho0.4_paper": (66.3, 3.5),
    "elastic_training_rho0.533_paper": (68.5, 2.35),
    "elastic_training_rho0.7_paper": (69.8, 1.7),
}
TARGET_MARGIN = 0.01  # "reaching full training's accuracy" means within 1 point of its final one


def config_name(run_name: str) -> str:
    """A run's name without its `_s<seed>` suffix."""
    return re.sub(r"_s\d+$", "", run_name)


def load_results(directory: str) -> Dict[str, List[Dict]]:
    """Run summaries of a study folder, grouped by config name (sorted by seed)."""
    groups: Dict[str, List[Dict]] = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as handle:
            summary = json.load(handle)
        if not isinstance(summary, dict) or "run_name" not in summary:
            raise UserError(f"{path} is not a run summary (it has no run_name), and every *.json in {directory} "
                            "is read as one: move it to a folder of its own")
        groups.setdefault(config_name(summary["run_name"]), []).append(summary)
    for runs in groups.values():
        runs.sort(key=lambda summary: summary.get("seed", 0))
    return groups


def time_to_reach(history: Sequence[Dict], accuracy: float) -> Optional[float]:
    """Training seconds at the end of the first epoch whose test accuracy reaches `accuracy`
    (None also for a run that did not test every epoch: see `tested_every_epoch`)."""
    for entry in history:
        if entry.get("test_accuracy", -1.0) >= accuracy - 1e-9:
            return float(entry["train_seconds"])
    return None


def tested_every_epoch(runs: Sequence[Dict]) -> bool:
    """Whether every epoch of these runs was tested (main.py --test_every_epoch, or older runs,
    which tested every epoch): only then is there a time to reach an accuracy."""
    return all("test_accuracy" in entry for run in runs for entry in run["history"])


def summarize_groups(groups: Dict[str, List[Dict]], reference: str = "full_training") -> tuple:
    """One row per config: mean ± std over seeds, times to reach the reference's final accuracy
    minus 1 point, and speedups over the reference (wall time, and time to that accuracy)."""
    if reference not in groups:
        raise UserError(f"no {reference} runs among the results ({', '.join(sorted(groups))}); "
                        f"the table compares everything with it")
    target = mean_std([run["final_test_accuracy"] for run in groups[reference]])[0] - TARGET_MARGIN
    full_seconds = mean_std([run["train_seconds"] for run in groups[reference]])[0]
    full_final = target + TARGET_MARGIN
    reference_reach = [time_to_reach(run["history"], target) for run in groups[reference]]
    # Only when every seed of the reference gets there is its mean time to get there meaningful.
    full_reach = (statistics.fmean(reference_reach) if None not in reference_reach else None)
    rows = []
    for name, runs in groups.items():
        reach = [time_to_reach(run["history"], target) for run in runs]
        accuracies = [run["best_test_accuracy"] for run in runs]
        seconds = mean_std([run["train_seconds"] for run in runs])
        reached = [r for r in reach if r is not None]
        overhead = [run.get("overhead_share", overhead_share(  # older results did not record it
            run.get("compile_seconds", 0.0), run.get("selection_seconds", []), run["train_seconds"])) for run in runs]
        rows.append({
            "config": name, "seeds": len(runs), "curves": tested_every_epoch(runs),
            "best_accuracy": mean_std(accuracies),
            # model selection on the validation split (None for runs made without one)
            "selected_accuracy": mean_std([run.get("test_accuracy_at_best_val") for run in runs]),
            "validation_accuracy": mean_std([run.get("best_val_accuracy") for run in runs]),
            "accuracies": accuracies,
            "selected_accuracies": [run.get("test_accuracy_at_best_val") for run in runs],
            "relative_accuracy": mean_std([run["final_test_accuracy"] for run in runs])[0] / full_final,
            "final_accuracy": mean_std([run["final_test_accuracy"] for run in runs]),
            "train_seconds": seconds,
            "step_ratio": mean_std([run.get("step_time_ratio_live", float("nan")) for run in runs]),
            "overhead_share": mean_std(overhead),
            "peak_memory": mean_std([run.get("peak_memory_mb", float("nan")) for run in runs]),
            "reached": len(reached),
            "time_to_target": mean_std(reached),
            "speedup": full_seconds / seconds[0],
            "speedup_to_target": (full_reach / statistics.fmean(reached)
                                  if full_reach is not None and len(reached) == len(runs) else None),
            "paper": PAPER.get(name),
        })
    rows.sort(key=lambda row: (row["config"] != reference, row["config"]))
    return rows, target


def markdown(rows: List[Dict], target: float) -> str:
    """The claims table in markdown."""
    lines = [f"| run | seeds | final test acc % | test acc % at val-best epoch | best val acc % | best test acc % (original) | final / full | wall s | step ratio (live) | compile + selection | peak MB | "
             f"s to {100 * target:.1f} % | speedup (wall) | speedup to {100 * target:.1f} % | paper acc % / speedup |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        reach = (plus_minus(row["time_to_target"], digits=0) + ("" if row["reached"] == row["seeds"]
                                                           else f" ({row['reached']}/{row['seeds']} reached)")
                 if row["reached"] else "never") if row.get("curves", True) else "- (tested at the end)"
        to_target = f"{row['speedup_to_target']:.2f}x" if row["speedup_to_target"] else "-"
        paper = f"{row['paper'][0]:.1f} / {row['paper'][1]:.2f}x" if row["paper"] else ""
        lines.append(f"| {row['config']} | {row['seeds']} | {plus_minus(row['final_accuracy'], 100)} | "
                     f"{plus_minus(row['selected_accuracy'], 100)} | "
                     f"{plus_minus(row['validation_accuracy'], 100)} | {plus_minus(row['best_accuracy'], 100)} | "
                     f"{row['relative_accuracy']:.2f} | {plus_minus(row['train_seconds'], digits=0)} | {plus_minus(row['step_ratio'], digits=2)} | "
                     f"{plus_minus(row['overhead_share'], 100)} % | {plus_minus(row['peak_memory'], digits=0)} | {reach} | {row['speedup']:.2f}x | {to_target} | {paper} |")
    return "\n".join(lines) + "\n"


def mean_curve(runs: Sequence[Dict]) -> tuple:
    """Mean training seconds and accuracy per epoch over runs, at the epochs every run evaluated
    (all runs have the epoch, and its accuracy: with --eval_every 3 the 3rd, 6th, ... and the
    last): test accuracy when every epoch was tested, else validation accuracy ([] when neither)."""
    epochs = min(len(run["history"]) for run in runs)
    key = "test_accuracy" if tested_every_epoch(runs) else "val_accuracy"
    points = [e for e in range(epochs) if all(key in run["history"][e] for run in runs)]
    seconds = [statistics.fmean(run["history"][e]["train_seconds"] for run in runs) for e in points]
    accuracy = [statistics.fmean(run["history"][e][key] for run in runs) for e in points]
    return seconds, accuracy


def plot(groups: Dict[str, List[Dict]], rows: List[Dict], target: float, title: str, path: str) -> None:
    """Left: mean test accuracy against training time per config; right: best accuracy (mean ±
    std over seeds) against wall time (mean ± std)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (curves, scatter) = plt.subplots(1, 2, figsize=(13, 5.2))
    colors = plt.get_cmap("tab20").colors
    for index, row in enumerate(rows):
        name, color = row["config"], colors[index % len(colors)]
        style = "-" if "elastic" in name or name == "full_training" else "--"
        seconds, accuracy = mean_curve(groups[name])
        curves.plot(seconds, [100 * a for a in accuracy], style, color=color, marker=".", label=name)
        scatter.errorbar(row["train_seconds"][0], 100 * row["final_accuracy"][0], xerr=row["train_seconds"][1],
                         yerr=100 * row["final_accuracy"][1], fmt="o", color=color, capsize=3, label=name)
    curves.axhline(100 * target, color="grey", linewidth=0.8, linestyle=":")
    curves.set(xlabel="training time (s, evaluation excluded)",
               ylabel="test (or, tested at the end only, validation) accuracy (%)", title="mean over seeds, per epoch")
    scatter.set(xlabel="training wall time (s)", ylabel="final test accuracy (%)",
                title="mean ± std over seeds")
    curves.grid(alpha=0.3)
    scatter.grid(alpha=0.3)
    scatter.legend(fontsize=7, loc="lower right")
    figure.suptitle(title)
    figure.tight_layout()
    for target_path in (path, os.path.splitext(path)[0] + ".pdf"):
        with atomic_path(target_path) as temporary:
            figure.savefig(temporary, dpi=120)
    plt.close(figure)


def provenance_note(groups: Dict[str, List[Dict]]) -> str:
    """A warning when the runs of a table come from more than one code state (commit, or a tree
    that differed from it) or more than one initial backbone; "" when they are one (or unrecorded)."""
    def code(run: Dict) -> str:
        record = run.get("provenance") or {}
        commit = record.get("code_commit")
        return "unrecorded" if commit is None else commit[:10] + ("+dirty" if record.get("code_dirty") else "")

    def backbone(run: Dict) -> str:
        sha = run.get("backbone_sha256") or (run.get("provenance") or {}).get("weights_sha256")
        return sha[:12] if sha else "unrecorded"

    notes = []
    for what, key in (("code states", code), ("backbones", backbone)):
        kinds: Dict[str, List[str]] = {}
        for name, runs in groups.items():
            for run in runs:
                kinds.setdefault(key(run), []).append(run.get("run_name", name))
        if len(kinds) > 1:
            notes.append(f"**These rows mix {len(kinds)} {what}**: " + "; ".join(
                f"{kind} ({len(names)} runs, e.g. {names[0]})" for kind, names in sorted(kinds.items())))
    return "\n\n".join(notes)


def run_rows(groups: Dict[str, List[Dict]]) -> List[Dict]:
    """One flat row per run: its summary's plain values, its resolved configuration (`config.*`)
    and provenance (`provenance.*`); lists (history, selections) left out."""
    rows = []
    for name, runs in groups.items():
        for run in runs:
            row = {"config_name": name}
            for key, value in run.items():
                if isinstance(value, dict) and key in ("config", "provenance", "ran_on"):
                    row.update({f"{key}.{inner}": item for inner, item in value.items()
                                if not isinstance(item, (dict, list))})
                elif not isinstance(value, (dict, list)):
                    row[key] = value
            rows.append(row)
    return rows


def write_runs_csv(groups: Dict[str, List[Dict]], path: str) -> None:
    """`run_rows` as CSV (atomically): `pandas.read_csv(path)` loads a study in one line."""
    import csv
    import io

    rows = run_rows(groups)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def learning_rate_groups(groups: Dict[str, List[Dict]]) -> Dict[str, Dict[str, List[Dict]]]:
    """Calibration results split by the `_lr<rate>` in their config names."""
    split: Dict[str, Dict[str, List[Dict]]] = {}
    for name, runs in groups.items():
        match = re.search(r"_lr([0-9.e-]+)", name)
        if match:
            split.setdefault(match.group(1), {})[name] = runs
    return dict(sorted(split.items(), key=lambda item: float(item[0])))


def write_table(plan: str, model_name: str, directory: str, output: Optional[str], figure_path: str,
                appendix: Optional[Callable[[Dict[str, List[Dict]], List[Dict]], str]] = None, footer: str = "",
                runs_csv: Optional[str] = None) -> int:
    """Print the table of a study's results, write it to `output` (if given), draw the figure, and
    write a row per run to `runs_csv` (default: runs.csv in `directory`, beside the results).

    The calibration plan gets one table per learning rate, each against full training at that rate.
    `appendix(groups, rows)`, when given, adds a section below the table (the depth and regime
    plans' readings, assembled by the caller); `footer`, when given, goes last (printed too): which
    machines ran the runs, and runs missing or finished twice (experiments/sharding.py).
    """
    groups = load_results(directory)
    if not groups:
        raise UserError(f"no results in {directory}: run `python scripts/study.py run {plan} "
                        f"--model_name {model_name}` first")
    sections, all_rows = [], []
    parts = learning_rate_groups(groups) if plan == "calibration" else {"": groups}
    for rate, part in parts.items():
        reference = f"full_training_lr{rate}" if rate else "full_training"
        if reference not in part:  # a rate only training from scratch was tried at
            reference = sorted(part)[0]
        rows, target = summarize_groups(part, reference)
        sections.append((f"learning rate {rate}\n\n" if rate else "") + markdown(rows, target))
        all_rows += rows
    table = "\n".join(sections)
    note = provenance_note(groups)
    if note:
        table += "\n" + note + "\n"
    print(table)
    plot(groups, all_rows, target, f"{model_name}: {plan} study on the embedded dataset", figure_path)
    print(f"figure: {figure_path} (and .pdf)")
    if appendix:
        table += "\n" + appendix(groups, all_rows)
    if footer:
        print(footer)
        table += "\n\n" + footer + "\n"
    if output:
        atomic_write_text(output, table)
    runs_csv = runs_csv or os.path.join(directory, "runs.csv")
    write_runs_csv(groups, runs_csv)
    print(f"runs: {runs_csv} (one row a run)")
    return 0
