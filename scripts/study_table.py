"""Summaries of a study's runs: the claims table (mean ± std over seeds) and its figure.

Pure functions over the run summaries that scripts/study.py keeps in results/; only
`write_table` touches files.
"""
from __future__ import annotations

import glob
import json
import math
import os
import re
import statistics
from typing import Dict, List, Optional, Sequence

from utils import UserError, atomic_path, atomic_write_text

# The paper's figures (ResNet50, CUB-200, ImageNet weights, Jetson TX2; DESIGN.md §7.2), by the
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
        groups.setdefault(config_name(summary["run_name"]), []).append(summary)
    for runs in groups.values():
        runs.sort(key=lambda summary: summary.get("seed", 0))
    return groups


def time_to_reach(history: Sequence[Dict], accuracy: float) -> Optional[float]:
    """Training seconds at the end of the first epoch whose test accuracy reaches `accuracy`."""
    for entry in history:
        if entry["test_accuracy"] >= accuracy - 1e-9:
            return float(entry["train_seconds"])
    return None


def mean_std(values: Sequence[float]) -> tuple:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize_groups(groups: Dict[str, List[Dict]], reference: str = "full_training") -> tuple:
    """One row per config: mean ± std over seeds, times to reach the reference's final accuracy
    minus 1 point, and speedups over the reference (wall time, and time to that accuracy)."""
    if reference not in groups:
        raise UserError(f"no {reference} runs among the results ({', '.join(sorted(groups))}); "
                        f"the table compares everything with it")
    target = mean_std([run["final_test_accuracy"] for run in groups[reference]])[0] - TARGET_MARGIN
    full_seconds = mean_std([run["train_seconds"] for run in groups[reference]])[0]
    full_best = mean_std([run["best_test_accuracy"] for run in groups[reference]])[0]
    reference_reach = [time_to_reach(run["history"], target) for run in groups[reference]]
    # Only when every seed of the reference gets there is its mean time to get there meaningful.
    full_reach = (statistics.fmean(reference_reach) if None not in reference_reach else None)
    rows = []
    for name, runs in groups.items():
        reach = [time_to_reach(run["history"], target) for run in runs]
        seconds = mean_std([run["train_seconds"] for run in runs])
        reached = [r for r in reach if r is not None]
        overhead = [(run.get("compile_seconds", 0.0) + sum(run.get("selection_seconds", []))) / run["train_seconds"]
                    for run in runs]
        rows.append({
            "config": name, "seeds": len(runs),
            "best_accuracy": mean_std([run["best_test_accuracy"] for run in runs]),
            "accuracies": [run["best_test_accuracy"] for run in runs],
            "relative_accuracy": mean_std([run["best_test_accuracy"] for run in runs])[0] / full_best,
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


def _pm(pair: tuple, scale: float = 1.0, digits: int = 1) -> str:
    mean, std = pair
    if not math.isfinite(mean):
        return "-"
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}"


def markdown(rows: List[Dict], target: float) -> str:
    """The claims table in markdown."""
    lines = [f"| run | seeds | best acc % | / full | wall s | step ratio (live) | compile + selection | peak MB | "
             f"s to {100 * target:.1f} % | speedup (wall) | speedup to {100 * target:.1f} % | paper acc % / speedup |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        reach = (_pm(row["time_to_target"], digits=0) + ("" if row["reached"] == row["seeds"]
                                                           else f" ({row['reached']}/{row['seeds']} reached)")
                 if row["reached"] else "never")
        to_target = f"{row['speedup_to_target']:.2f}x" if row["speedup_to_target"] else "-"
        paper = f"{row['paper'][0]:.1f} / {row['paper'][1]:.2f}x" if row["paper"] else ""
        lines.append(f"| {row['config']} | {row['seeds']} | {_pm(row['best_accuracy'], 100)} | "
                     f"{row['relative_accuracy']:.2f} | {_pm(row['train_seconds'], digits=0)} | {_pm(row['step_ratio'], digits=2)} | "
                     f"{_pm(row['overhead_share'], 100)} % | {_pm(row['peak_memory'], digits=0)} | {reach} | {row['speedup']:.2f}x | {to_target} | {paper} |")
    return "\n".join(lines) + "\n"


def mean_curve(runs: Sequence[Dict]) -> tuple:
    """Mean training seconds and test accuracy per epoch over runs (epochs all runs have)."""
    epochs = min(len(run["history"]) for run in runs)
    seconds = [statistics.fmean(run["history"][e]["train_seconds"] for run in runs) for e in range(epochs)]
    accuracy = [statistics.fmean(run["history"][e]["test_accuracy"] for run in runs) for e in range(epochs)]
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
        scatter.errorbar(row["train_seconds"][0], 100 * row["best_accuracy"][0], xerr=row["train_seconds"][1],
                         yerr=100 * row["best_accuracy"][1], fmt="o", color=color, capsize=3, label=name)
    curves.axhline(100 * target, color="grey", linewidth=0.8, linestyle=":")
    curves.set(xlabel="training time (s, validation excluded)", ylabel="test accuracy (%)",
               title="mean over seeds, per epoch")
    scatter.set(xlabel="training wall time (s)", ylabel="best test accuracy (%)",
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


def gap_recovered(rows: List[Dict], floor: str = "traditional_tl_training",
                  ceiling: str = "full_training") -> Dict[str, tuple]:
    """Per config, the share of the gap between `floor` and `ceiling` (mean best accuracies) that
    its runs recover: (accuracy − floor) / (ceiling − floor), mean ± std over its seeds."""
    by_name = {row["config"]: row for row in rows}
    if floor not in by_name or ceiling not in by_name:
        raise UserError(f"the gap needs {floor} and {ceiling} results")
    low, high = by_name[floor]["best_accuracy"][0], by_name[ceiling]["best_accuracy"][0]
    if high <= low:
        raise UserError(f"{ceiling} ({100 * high:.1f} %) is not above {floor} ({100 * low:.1f} %): there is no gap")
    return {row["config"]: mean_std([(accuracy - low) / (high - low) for accuracy in row["accuracies"]])
            for row in rows}


DEPTH_SUPPORT = 2 / 3  # "most of the gap" in the depth plan's rule (BENCHMARKS.md)


def depth_verdict(rows: List[Dict], stages: Sequence[str], budget_step_ratio: float) -> str:
    """The depth plan's rule, fixed before it ran (BENCHMARKS.md, "Where the accuracy lives"):
    supported if the first stage alone recovers more of the gap than any later stage alone and a
    contiguous top recovers ≥ 2/3 only with the stem; refuted if a later stage alone recovers
    ≥ 2/3 at a step ratio within ElasticTrainer's budget."""
    gaps = gap_recovered(rows)
    by_name = {row["config"]: row for row in rows}
    stage_names = ["block_range_training_blocks" + stage.replace(":", "-") for stage in stages]
    if any(name not in gaps for name in stage_names):
        return "incomplete: not every stage has results yet"
    first, later = gaps[stage_names[0]][0], [gaps[name][0] for name in stage_names[1:]]
    cheap_and_enough = [name for name in stage_names[1:] if gaps[name][0] >= DEPTH_SUPPORT
                        and by_name[name]["step_ratio"][0] <= budget_step_ratio]
    if cheap_and_enough:
        return (f"refuted: {', '.join(cheap_and_enough)} alone recover(s) >= 2/3 of the gap at a step ratio "
                f"within the budget ({budget_step_ratio:.2f})")
    tops = sorted((by_name[name]["step_ratio"][0], gaps[name][0], name) for name in gaps
                  if name.startswith("static_top_training"))
    enough_tops = [name for _, gap, name in tops if gap >= DEPTH_SUPPORT]
    front_first = first > max(later)
    lines = [f"stem alone recovers {first:.2f} of the gap; later stages {', '.join(f'{g:.2f}' for g in later)}",
             "contiguous tops recovering >= 2/3: " + (", ".join(enough_tops) or "none")]
    return ("supported" if front_first else "not supported") + ": " + "; ".join(lines)


def plot_depth(rows: List[Dict], gaps: Dict[str, tuple], title: str, path: str) -> None:
    """Best accuracy (mean ± std) against the live step ratio: each stage alone, contiguous tops,
    and the headline configs, with full training and traditional TL as lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8.5, 5.5))
    by_name = {row["config"]: row for row in rows}
    for name, line in (("full_training", "-"), ("traditional_tl_training", "--")):
        if name in by_name:
            axes.axhline(100 * by_name[name]["best_accuracy"][0], color="grey", linestyle=line, linewidth=0.9,
                         label=f"{name} ({100 * by_name[name]['best_accuracy'][0]:.1f} %)")
    families = (("block_range_training", "one stage alone", "tab:blue", "s"),
                ("static_top_training", "contiguous top (static top)", "tab:green", "^"),
                ("elastic_training", "ElasticTrainer", "tab:red", "o"),
                ("bn_plus_bias_training", "BN+bias", "tab:purple", "D"))
    for prefix, label, color, marker in families:
        members = sorted((row for row in rows if row["config"].startswith(prefix)
                          and math.isfinite(row["step_ratio"][0])), key=lambda row: row["step_ratio"][0])
        for index, row in enumerate(members):
            axes.errorbar(row["step_ratio"][0], 100 * row["best_accuracy"][0], xerr=row["step_ratio"][1],
                          yerr=100 * row["best_accuracy"][1], fmt=marker, color=color, capsize=3,
                          label=label if index == 0 else None)
            tag = row["config"].replace(prefix, "").strip("_").replace("blocks", "blocks ") or prefix
            axes.annotate(f"{tag} ({gaps[row['config']][0]:.2f})", (row["step_ratio"][0], 100 * row["best_accuracy"][0]),
                          textcoords="offset points", xytext=(5, 4), fontsize=7, color=color)
    axes.set(xlabel="step time / full step (live, mean ± std)", ylabel="best test accuracy (%, mean ± std)",
             title=title + "\n(in brackets: share of the full-vs-TL gap recovered)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    for target_path in (path, os.path.splitext(path)[0] + ".pdf"):
        with atomic_path(target_path) as temporary:
            figure.savefig(temporary, dpi=120)
    plt.close(figure)


def learning_rate_groups(groups: Dict[str, List[Dict]]) -> Dict[str, Dict[str, List[Dict]]]:
    """Calibration results split by the `_lr<rate>` in their config names."""
    split: Dict[str, Dict[str, List[Dict]]] = {}
    for name, runs in groups.items():
        match = re.search(r"_lr([0-9.e-]+)", name)
        if match:
            split.setdefault(match.group(1), {})[name] = runs
    return dict(sorted(split.items(), key=lambda item: float(item[0])))


def depth_section(rows: List[Dict], model_name: str, figure_path: str) -> str:
    """The depth plan's reading: the gap each config recovers, the verdict of its rule, a figure."""
    from study_plans import DEPTH_STAGES

    gaps = gap_recovered(rows)
    by_name = {row["config"]: row for row in rows}
    budget = by_name.get("elastic_training_rho0.533_paper", {}).get("step_ratio", (float("nan"),))[0]
    lines = ["| run | step ratio (live) | best acc % | share of the full-vs-TL gap recovered |",
             "|---|---:|---:|---:|"]
    for row in sorted(rows, key=lambda row: (row["step_ratio"][0] if math.isfinite(row["step_ratio"][0]) else 1.0)):
        lines.append(f"| {row['config']} | {_pm(row['step_ratio'], digits=2)} | {_pm(row['best_accuracy'], 100)} | "
                     f"{_pm(gaps[row['config']], digits=2)} |")
    verdict = depth_verdict(rows, DEPTH_STAGES[model_name], budget)
    plot_depth(rows, gaps, f"{model_name}: where fine-tuning's accuracy lives", figure_path)
    text = "\n".join(lines) + f"\n\nRule (BENCHMARKS.md, fixed before the runs): {verdict}\n"
    print(text + f"figure: {figure_path} (and .pdf)")
    return text


def write_table(plan: str, model_name: str, directory: str, output: Optional[str], figure_path: str) -> int:
    """Print the table of a study's results, write it to `output` (if given), draw the figure.

    The calibration plan gets one table per learning rate, each against full training at that rate.
    """
    groups = load_results(directory)
    if not groups:
        raise UserError(f"no results in {directory}: run `python scripts/study.py run {plan} "
                        f"--model_name {model_name}` first")
    sections, all_rows = [], []
    parts = learning_rate_groups(groups) if plan == "calibration" else {"": groups}
    for rate, part in parts.items():
        rows, target = summarize_groups(part, f"full_training_lr{rate}" if rate else "full_training")
        sections.append((f"learning rate {rate}\n\n" if rate else "") + markdown(rows, target))
        all_rows += rows
    table = "\n".join(sections)
    print(table)
    plot(groups, all_rows, target, f"{model_name}: {plan} study on the embedded dataset", figure_path)
    print(f"figure: {figure_path} (and .pdf)")
    if plan == "depth":
        table += "\n" + depth_section(all_rows, model_name, os.path.splitext(figure_path)[0] + "_depth.png")
    if output:
        atomic_write_text(output, table)
    return 0
