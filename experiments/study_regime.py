"""The regime plan's reading (scripts/study.py table regime; assembled below the table by scripts/study.py): is a task in the paper's regime?

The criteria were fixed in docs/benchmarks/regime_and_depth.md ("A task in the paper's regime"), before any selective
scheme ran on the task. Every accuracy is the test accuracy at the epoch of best validation
accuracy, mean over seeds. Pure functions over run summaries grouped by config name.
"""
from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

FULL, TL, BN_BIAS = "full_training", "traditional_tl_training", "bn_plus_bias_training"


def block_config(block_range: str) -> str:
    return "block_range_training_blocks" + block_range.replace(":", "-")


def selected_accuracy(runs: Sequence[Dict]) -> Optional[float]:
    """Mean over seeds of the test accuracy at the validation-best epoch (None without one)."""
    values = [run.get("test_accuracy_at_best_val") for run in runs]
    return statistics.fmean(values) if values and None not in values else None


def criteria(groups: Dict[str, List[Dict]], top_half: str, first_three: str) -> List[Tuple[str, Optional[float], str, Optional[bool]]]:
    """(criterion, measured value, the bound, passed) for each criterion; value and passed are None
    while its runs are missing."""
    scratch = [name for name in groups if name.startswith(FULL) and name.endswith("_scratch")]
    means = {name: selected_accuracy(runs) for name, runs in groups.items()}
    full, tl = means.get(FULL), means.get(TL)
    gap = full - tl if full is not None and tl is not None else None

    def closes(name: str) -> Optional[float]:
        value = means.get(name)
        return (value - tl) / gap if value is not None and gap else None

    ratio_scratch = full / means[scratch[0]] if full is not None and scratch and means[scratch[0]] else None
    rows = [("full from the backbone / full from scratch", ratio_scratch, ">= 1.5", lambda v: v >= 1.5),
            ("traditional TL / full", tl / full if full and tl is not None else None, "0.55 - 0.92",
             lambda v: 0.55 <= v <= 0.92),
            ("share of the gap BN+bias closes", closes(BN_BIAS), "0.25 - 0.70", lambda v: 0.25 <= v <= 0.70),
            (f"share of the gap blocks {top_half} alone close", closes(block_config(top_half)), ">= 0.50",
             lambda v: v >= 0.50),
            (f"share of the gap blocks {first_three} alone close", closes(block_config(first_three)), "<= 0.30",
             lambda v: v <= 0.30)]
    return [(name, value, bound, None if value is None else bool(test(value))) for name, value, bound, test in rows]


def regime_section(groups: Dict[str, List[Dict]], top_half: str, first_three: str) -> str:
    """The criteria as a markdown table and the verdict (accepted, rejected, or incomplete)."""
    rows = criteria(groups, top_half, first_three)
    lines = ["| criterion | measured | bound | met |", "|---|---:|---:|---|"]
    for name, value, bound, passed in rows:
        lines.append(f"| {name} | {'-' if value is None else f'{value:.2f}'} | {bound} | "
                     f"{'-' if passed is None else ('yes' if passed else 'no')} |")
    missing = [name for name, _, _, passed in rows if passed is None]
    verdict = ("incomplete: " + "; ".join(missing) if missing
               else "accepted" if all(passed for *_, passed in rows) else "rejected")
    return "\n".join(lines) + f"\n\nVerdict (criteria fixed in BENCHMARKS.md before the runs): {verdict}\n"
