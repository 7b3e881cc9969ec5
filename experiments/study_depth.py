"""The depth plan's reading (scripts/study.py table depth): how much of the gap between
traditional TL and full training each config recovers, the plan's rule (fixed in
docs/benchmarks/regime_and_depth.md, "Where the accuracy lives", before any of its runs), and the accuracy-by-depth figure.

Pure functions over the rows of study_table.summarize_groups; only the figure touches files.
"""
from __future__ import annotations

import math
import os
from typing import Dict, List, Sequence

from elastic_trainer.command_line import UserError
from elastic_trainer.files import atomic_path
from experiments.study_stats import mean_std, plus_minus

FLOOR, CEILING = "traditional_tl_training", "full_training"
BUDGET = "elastic_training_rho0.533_paper"  # the paper's "50 %" run: its step ratio is the budget
SUPPORT = 2 / 3  # "most of the gap"


def stage_config(stage: str) -> str:
    return "block_range_training_blocks" + stage.replace(":", "-")


def top_config(rho: float) -> str:
    return f"static_top_training_rho{rho:g}_exact"


def measure(rows: List[Dict]) -> str:
    """The accuracy the reading uses: test accuracy at the validation-best epoch when every run
    had a validation split (the label-space task), else the best test accuracy (the original's)."""
    selected = all(None not in row.get("selected_accuracies", [None]) for row in rows)
    return "selected" if selected else "best"


def per_seed(row: Dict, kind: str) -> List[float]:
    return row["selected_accuracies"] if kind == "selected" else row["accuracies"]


def gap_recovered(rows: List[Dict]) -> Dict[str, tuple]:
    """Per config, (accuracy − TL's) / (full's − TL's) over its seeds' accuracies (mean ± std; the
    accuracy of `measure`), TL's and full training's taken as their means over seeds."""
    by_name = {row["config"]: row for row in rows}
    if FLOOR not in by_name or CEILING not in by_name:
        raise UserError(f"the gap needs {FLOOR} and {CEILING} results")
    kind = measure(rows)
    low, high = by_name[FLOOR][kind + "_accuracy"][0], by_name[CEILING][kind + "_accuracy"][0]
    if high <= low:
        raise UserError(f"{CEILING} ({100 * high:.1f} %) is not above {FLOOR} ({100 * low:.1f} %): there is no gap")
    return {row["config"]: mean_std([(accuracy - low) / (high - low) for accuracy in per_seed(row, kind)])
            for row in rows}


def depth_verdict(rows: List[Dict], stages: Sequence[str], static_tops: Sequence[float]) -> str:
    """The plan's rule. Supported: the first stage alone recovers more of the gap than any later
    stage alone, and among the contiguous tops only the deepest (which includes the stem)
    recovers ≥ 2/3. Refuted: a later stage alone recovers ≥ 2/3 at a step ratio within the
    "50 %" run's. Otherwise neither (or incomplete, while runs are missing)."""
    by_name = {row["config"]: row for row in rows}
    stage_names, top_names = [stage_config(stage) for stage in stages], [top_config(rho) for rho in static_tops]
    missing = [name for name in [FLOOR, CEILING, BUDGET, *stage_names, *top_names] if name not in by_name]
    if missing:
        return f"incomplete: needs {', '.join(missing)}"
    gaps = gap_recovered(rows)
    budget = by_name[BUDGET]["step_ratio"][0]
    cheap_and_enough = [name for name in stage_names[1:] if gaps[name][0] >= SUPPORT
                        and by_name[name]["step_ratio"][0] <= budget]
    if cheap_and_enough:
        return (f"refuted: {', '.join(cheap_and_enough)} alone recover(s) >= 2/3 of the gap at a step ratio "
                f"within the budget ({budget:.2f})")
    first, later = gaps[stage_names[0]][0], [gaps[name][0] for name in stage_names[1:]]
    deepest = top_config(max(static_tops))
    tops = [name for name in by_name if name.startswith("static_top_training")]
    enough_tops = [name for name in tops if gaps[name][0] >= SUPPORT]
    supported = first > max(later) and enough_tops == [deepest]
    return (("supported" if supported else "neither supported nor refuted") + ": "
            f"the stem alone recovers {first:.2f} of the gap, later stages {', '.join(f'{g:.2f}' for g in later)}; "
            "contiguous tops recovering >= 2/3: " + (", ".join(enough_tops) or "none"))


def plot_depth(rows: List[Dict], gaps: Dict[str, tuple], title: str, path: str) -> None:
    """Best accuracy (mean ± std) against the live step ratio: each stage alone, contiguous tops,
    and the headline configs, with full training and traditional TL as lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8.5, 5.5))
    by_name = {row["config"]: row for row in rows}
    key = measure(rows) + "_accuracy"
    for name, line in ((CEILING, "-"), (FLOOR, "--")):
        accuracy = 100 * by_name[name][key][0]
        axes.axhline(accuracy, color="grey", linestyle=line, linewidth=0.9, label=f"{name} ({accuracy:.1f} %)")
    families = (("block_range_training", "one stage alone", "tab:blue", "s"),
                ("static_top_training", "contiguous top (static top)", "tab:green", "^"),
                ("elastic_training", "ElasticTrainer", "tab:red", "o"),
                ("bn_plus_bias_training", "BN+bias", "tab:purple", "D"))
    for prefix, label, color, marker in families:
        members = sorted((row for row in rows if row["config"].startswith(prefix)
                          and math.isfinite(row["step_ratio"][0])), key=lambda row: row["step_ratio"][0])
        for index, row in enumerate(members):
            x, y = row["step_ratio"][0], 100 * row[key][0]
            axes.errorbar(x, y, xerr=row["step_ratio"][1], yerr=100 * row[key][1], fmt=marker,
                          color=color, capsize=3, label=label if index == 0 else None)
            tag = row["config"].replace(prefix, "").strip("_").replace("blocks", "blocks ") or prefix
            axes.annotate(f"{tag} ({gaps[row['config']][0]:.2f})", (x, y), textcoords="offset points",
                          xytext=(5, 4 - 9 * (index % 2)), fontsize=7, color=color)  # neighbours alternate
    axes.set(xlabel="step time / full step (live, mean ± std)",
             ylabel=("test accuracy at the validation-best epoch" if key == "selected_accuracy" else "best test accuracy")
             + " (%, mean ± std)",
             title=title + "\n(in brackets: share of the full-vs-TL gap recovered)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    for target_path in (path, os.path.splitext(path)[0] + ".pdf"):
        with atomic_path(target_path) as temporary:
            figure.savefig(temporary, dpi=120)
    plt.close(figure)


def depth_section(rows: List[Dict], model_name: str, figure_path: str) -> str:
    """The reading in markdown (each config's step ratio, accuracy and gap recovered, then the
    rule's verdict); draws the figure when full training and traditional TL have results.
    `model_name`: the study's key (parts_mobilenetv2 is MobileNetV2 on the parts task)."""
    from experiments.study_plans import DEPTH_STAGES, DEPTH_STATIC_TOPS, PROTOCOLS

    verdict = depth_verdict(rows, DEPTH_STAGES[PROTOCOLS[model_name]["model_name"]], DEPTH_STATIC_TOPS)
    names = {row["config"] for row in rows}
    if FLOOR not in names or CEILING not in names:
        return f"Rule (BENCHMARKS.md, fixed before the runs): {verdict}\n"
    gaps = gap_recovered(rows)
    key = measure(rows) + "_accuracy"
    lines = [f"| run | step ratio (live) | {'test acc % at val-best epoch' if key == 'selected_accuracy' else 'best acc %'}"
             " | share of the full-vs-TL gap recovered |", "|---|---:|---:|---:|"]
    for row in sorted(rows, key=lambda row: row["step_ratio"][0] if math.isfinite(row["step_ratio"][0]) else 1.0):
        lines.append(f"| {row['config']} | {plus_minus(row['step_ratio'], digits=2)} | {plus_minus(row[key], 100)} | "
                     f"{plus_minus(gaps[row['config']], digits=2)} |")
    plot_depth(rows, gaps, f"{model_name}: where fine-tuning's accuracy lives", figure_path)
    text = "\n".join(lines) + f"\n\nRule (BENCHMARKS.md, fixed before the runs): {verdict}\n"
    print(text + f"figure: {figure_path} (and .pdf)")
    return text
