"""Issue 54's judgement of the selector, read from its two folders of results (scripts/study.py table
judgement): the judgement plan's runs (full training, ElasticTrainer and the selector at each budget,
seeds 0-4, one batch) and the frontier plan's family on the same draw (seeds 0-2, and the placed
members on 3 and 4). The rule is BENCHMARKS.md's "The selector's judgement (issue 54)", fixed
2026-11-27 21:30 UTC before any of its runs; this reading of it was written before any of them was read.

Pure functions over the results' summaries (grouped by config name).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

from experiments.study_frontier import TIE, family_seeds, finite_count, frontier_at, paired_differences, point
from experiments.study_plans import JUDGEMENT_BUDGET_NAMES, JUDGEMENT_SEEDS
from experiments.study_stats import mean_std, paired_interval, plus_minus

SELECTOR = "gain_stage_training"
ELASTIC = "elastic_training"
FULL = "full_training"
TEST_MARGIN = 0.01  # the selector's final test accuracy at least the member's minus 1 point
INTERVAL_FLOOR = -0.02  # and the lower end of the paired 95 % interval above -2 points
WALL_MARGIN = 0.03  # its training wall time at most ElasticTrainer's + 3 %


def budget_names() -> List[str]:
    """The rule's budgets as config-name suffixes ("rho0.533_paper", "rho0.7_exact")."""
    return list(JUDGEMENT_BUDGET_NAMES)


def family_points(frontier: Dict[str, List[Dict]]) -> List[Dict]:
    """The family's points, placed and ranked on the seeds every member ran (valued on all)."""
    seeds = family_seeds(frontier)
    return [point(name, runs, seeds) for name, runs in sorted(frontier.items())]


def train_seconds(runs: Sequence[Dict]) -> float:
    """Mean training wall time (every step, look, probe, DP and compile; no evaluation) of runs."""
    return mean_std([run.get("train_seconds") for run in runs])[0]


def placements(frontier: Dict[str, List[Dict]], judged: Dict[str, List[Dict]],
               selector: str = SELECTOR) -> Dict[str, Optional[Dict]]:
    """The frontier member at each budget, placed at the selector's own mean measured step ratio over
    its judging seeds (None where the selector has no runs or no member fits)."""
    family, placed = family_points(frontier), {}
    for budget in budget_names():
        runs = judged.get(f"{selector}_{budget}", [])
        ratio = mean_std([run.get("step_time_ratio_achieved") for run in runs])[0] if runs else float("nan")
        placed[budget] = frontier_at(family, ratio) if math.isfinite(ratio) else None
    return placed


def judgement(frontier: Dict[str, List[Dict]], judged: Dict[str, List[Dict]], selector: str = SELECTOR) -> List[Dict]:
    """The rule, budget by budget: one dict a budget whose selector and ElasticTrainer runs exist, with
    the numbers, `clauses` (a list of (text, met)) and `met` (every clause, on at least 5 seeds)."""
    verdicts, members = [], placements(frontier, judged, selector)
    full = point(FULL, judged[FULL]) if judged.get(FULL) else None
    full_seconds = train_seconds(judged[FULL]) if judged.get(FULL) else float("nan")
    for budget in budget_names():
        mine_runs, their_runs = judged.get(f"{selector}_{budget}"), judged.get(f"{ELASTIC}_{budget}")
        if not mine_runs or not their_runs:
            continue
        mine, theirs = point(f"{selector}_{budget}", mine_runs), point(f"{ELASTIC}_{budget}", their_runs)
        member = members[budget]
        if member is not None:  # valued on all of its seeds, the placed ones (3 and 4) included
            member = point(member["config"], frontier[member["config"]], family_seeds(frontier))
        against_member = paired_differences(mine, member) if member else []
        difference = paired_interval(against_member) + (len(against_member),) if against_member else (
            (float("nan"),) * 3 + (0,))
        against_elastic = paired_differences(mine, theirs)
        versus_elastic = paired_interval(against_elastic) + (len(against_elastic),)
        seconds, their_seconds = train_seconds(mine_runs), train_seconds(their_runs)
        member_test = member["test"][0] if member else float("nan")
        clauses = [
            ("final test not below ElasticTrainer's", mine["test"][0] >= theirs["test"][0] - TIE),
            (f"final test at least the frontier's minus {100 * TEST_MARGIN:g} point",
             mine["test"][0] >= member_test - TEST_MARGIN - TIE),
            (f"paired interval's lower end above {100 * INTERVAL_FLOOR:+g} points", difference[1] > INTERVAL_FLOOR),
            (f"training wall time at most ElasticTrainer's + {100 * WALL_MARGIN:g} %",
             seconds <= (1 + WALL_MARGIN) * their_seconds)]
        seeds = min(finite_count(mine["by_seed"].values()), finite_count(theirs["by_seed"].values()), difference[3])
        verdicts.append({"budget": budget, "selector": mine, "elastic": theirs, "member": member,
                         "placed_at": mine["ratio"], "elastic_ratio": theirs["ratio"], "difference": difference,
                         "versus_elastic": versus_elastic, "seconds": seconds, "elastic_seconds": their_seconds,
                         "speedup": full_seconds / seconds, "elastic_speedup": full_seconds / their_seconds,
                         "full": full, "clauses": clauses, "seeds": seeds,
                         "met": all(met for _, met in clauses) and seeds >= len(JUDGEMENT_SEEDS),
                         "above_frontier": difference[1] > 0})
    return verdicts


def interval_text(values: tuple) -> str:
    mean, low, high, count = values
    return f"{100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}] ({count})" if math.isfinite(low) else "-"


def judgement_section(frontier: Dict[str, List[Dict]], judged: Dict[str, List[Dict]], selector: str = SELECTOR) -> str:
    """The rule's reading on one draw (markdown): each budget's numbers, then each clause met or not."""
    verdicts = judgement(frontier, judged, selector)
    if not verdicts:
        return f"No {selector} and ElasticTrainer runs to read yet.\n"
    mark = {True: "met", False: "**not met**"}
    lines = [f"Issue 54's rule (BENCHMARKS.md) on {selector}; final-epoch test accuracy, mean ± std over each "
             "config's seeds; the frontier member is placed at the selector's own mean step ratio over its "
             "judging seeds (\"placed at\") and valued on all of its seeds; differences paired by seed with "
             "their 95 % t interval (seeds); training seconds are means from the judgement plan's one batch.", "",
             "| budget | selector % | ElasticTrainer % | selector minus ElasticTrainer | placed at (ET's ratio) | "
             "frontier member, % | selector minus member | training s (ET's), ratio | speedup over full "
             "training (ET's) |",
             "|---|---:|---:|---|---:|---|---|---|---|"]
    for v in verdicts:
        member = v["member"]
        lines.append(
            f"| {v['budget']} | {plus_minus(v['selector']['test'], 100)} | {plus_minus(v['elastic']['test'], 100)} | "
            f"{interval_text(v['versus_elastic'])} | {v['placed_at']:.3f} ({v['elastic_ratio']:.3f}) | "
            + (f"{member['config']}, {plus_minus(member['test'], 100)} | " if member else "- | ")
            + f"{interval_text(v['difference'])} | {v['seconds']:.1f} ({v['elastic_seconds']:.1f}), "
            f"{v['seconds'] / v['elastic_seconds']:.3f} | {v['speedup']:.2f}x ({v['elastic_speedup']:.2f}x) |")
    lines += ["", "| budget | " + " | ".join(text for text, _ in verdicts[0]["clauses"])
              + f" | all, on {len(JUDGEMENT_SEEDS)} seeds | above the frontier (interval above 0) |",
              "|---|" + "---|" * (len(verdicts[0]["clauses"]) + 2)]
    for v in verdicts:
        every = all(met for _, met in v["clauses"])
        overall = mark[v["met"]] if v["met"] or not every else f"each clause met, on {v['seeds']} seeds"
        lines.append(f"| {v['budget']} | " + " | ".join(mark[met] for _, met in v["clauses"])
                     + f" | {overall} | {'yes' if v['above_frontier'] else 'no'} |")
    missing = [budget for budget in budget_names() if budget not in {v["budget"] for v in verdicts}]
    if missing:
        lines += ["", f"Not read yet (no {selector} or ElasticTrainer runs at it): {', '.join(missing)}."]
    return "\n".join(lines) + "\n"
