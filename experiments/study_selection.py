"""What a selective scheme's selections hold, stage by stage (scripts/study.py table frontier):
for each selection of a run, the share of each resolution stage's tensors it trains, and the
deepest stage it reaches (which sets the backward chain it pays for). Set beside what each stage
gains when trained alone, it shows where a scheme spends its budget against where the accuracy is.

Pure functions over masks (run_outputs' "elastic/selection" text) and block layouts ("elastic/blocks").
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

from experiments.study_frontier import final_value
from experiments.study_stats import mean_std

Stage = Tuple[int, int]  # [first block, stop block)


def stage_tensors(blocks: Sequence[Tuple[str, int]], stages: Sequence[Stage], head: int) -> List[Tuple[int, int]]:
    """Each stage's [first tensor, stop tensor) in model order: from its first block's first tensor
    to the next stage's, the last stage ending where the classifier (tensor `head`) begins."""
    starts = [start for _, start in blocks] + [head]
    return [(starts[first], starts[stop]) for first, stop in stages]


def stage_shares(mask: Sequence[int], bounds: Sequence[Tuple[int, int]]) -> List[float]:
    """The share of each stage's tensors that `mask` trains."""
    return [sum(mask[first:stop]) / max(stop - first, 1) for first, stop in bounds]


def importance_shares(importance: Sequence[float], bounds: Sequence[Tuple[int, int]]) -> List[float]:
    """Each stage's share of the positive importance a selection was made on (the classifier's
    share is the rest)."""
    positive = [max(float(value), 0.0) for value in importance]
    total = sum(positive)
    return [sum(positive[first:stop]) / total if total > 0 else 0.0 for first, stop in bounds]


def deepest_stage(mask: Sequence[int], bounds: Sequence[Tuple[int, int]]) -> Optional[int]:
    """The index of the shallowest-in-the-network (first) stage with a trained tensor: the backward
    pass runs down to it. None when only the classifier trains."""
    for index, (first, stop) in enumerate(bounds):
        if any(mask[first:stop]):
            return index
    return None


def selection_profile(runs: Sequence[Dict], stages: Sequence[Stage]) -> List[Dict]:
    """Per selection index (0: the first), the mean over runs of each stage's share and the runs'
    deepest stages. `runs`: {"masks": [(step, mask), ...], "blocks": [(name, start), ...]}."""
    profile: List[Dict] = []
    for run in runs:
        head = len(run["masks"][0][1]) - 2 if run["masks"] else 0  # the classifier's kernel and bias
        bounds = stage_tensors(run["blocks"], stages, head)
        for index, (step, mask) in enumerate(run["masks"]):
            while len(profile) <= index:
                profile.append({"steps": [], "shares": [], "deepest": [], "importance": []})
            profile[index]["steps"].append(step)
            profile[index]["shares"].append(stage_shares(mask, bounds))
            profile[index]["deepest"].append(deepest_stage(mask, bounds))
            logged = run.get("importance") or []
            if index < len(logged):
                profile[index]["importance"].append(importance_shares(logged[index][1], bounds))
    mean = lambda rows: [sum(column) / len(column) for column in zip(*rows)]  # noqa: E731
    return [{"step": min(entry["steps"]), "shares": mean(entry["shares"]), "deepest": entry["deepest"],
             "importance": mean(entry["importance"]) if entry["importance"] else None} for entry in profile]


def selection_section(name: str, runs: Sequence[Dict], stages: Sequence[Stage], labels: Sequence[str]) -> str:
    """A markdown table: one row per selection, the mean share of each stage trained."""
    rows = selection_profile(runs, stages)
    if not rows:
        return ""
    lines = [f"{name} ({len(runs)} runs): share of each stage's tensors trained, mean over runs; the deepest "
             f"stage each run reached", "", "| selection | step | " + " | ".join(labels) + " | deepest |",
             "|---:|---:|" + "---:|" * len(labels) + "---|"]
    for index, row in enumerate(rows):
        deepest = ", ".join("-" if d is None else labels[d] for d in row["deepest"])
        lines.append(f"| {index + 1} | {row['step']} | " + " | ".join(f"{share:.2f}" for share in row["shares"])
                     + f" | {deepest} |")
    if any(row["importance"] for row in rows):
        lines += ["", "Each stage's share of the positive importance each selection was made on (the classifier "
                  "holds the rest), mean over runs:", "", "| selection | " + " | ".join(labels) + " |",
                  "|---:|" + "---:|" * len(labels)]
        lines += [f"| {index + 1} | " + " | ".join(f"{share:.2f}" for share in row["importance"]) + " |"
                  for index, row in enumerate(rows) if row["importance"]]
    return "\n".join(lines) + "\n"


def stage_gains_section(groups: Dict[str, List[Dict]], stages: Sequence[Stage], labels: Sequence[str]) -> str:
    """A markdown table: what each stage gains when trained alone (block_range_training of exactly
    that stage), on final-epoch validation accuracy over traditional TL's, in points, and at what
    measured step ratio (means over each config's runs). Empty without TL's runs."""
    baseline = mean_std([final_value(run, "val") for run in groups.get("traditional_tl_training", [])])[0]
    if not math.isfinite(baseline):
        return ""
    gains, ratios = [], []
    for first, stop in stages:
        runs = groups.get(f"block_range_training_blocks{first}-{stop}", [])
        val = mean_std([final_value(run, "val") for run in runs])[0]
        ratio = mean_std([run.get("step_time_ratio_achieved") for run in runs])[0]
        gains.append(f"{100 * (val - baseline):+.1f}" if math.isfinite(val) else "-")
        ratios.append(f"{ratio:.2f}" if math.isfinite(ratio) else "-")
    return "\n".join([
        "Each stage trained alone (with the classifier): its final validation accuracy minus traditional TL's, "
        "in points, and its measured step ratio (means over runs), beside which the importance shares below read:",
        "", "| | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels),
        "| gain over TL alone (val, points) | " + " | ".join(gains) + " |",
        "| its step ratio | " + " | ".join(ratios) + " |"]) + "\n"
