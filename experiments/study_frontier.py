"""The frontier plan's reading (scripts/study.py table frontier): at a budget b, a measured step
ratio, the frontier is the fixed configuration of the plan's family with the best validation
accuracy among those whose measured step ratio is at most b + MARGIN; its final-epoch test
accuracy is the frontier's value. Each scheme compared is set beside the frontier at its own
measured step ratio, and a grid of budgets shows the frontier alone. The definition was fixed in
docs/benchmarks/regime_and_depth.md ("The frontier: its definition") before any of the plan's runs.

Pure functions over the results' summaries (grouped by config name).
"""
from __future__ import annotations

import math
from typing import Collection, Dict, List, Optional, Sequence, Set

from experiments.study_plans import FRONTIER_COMPARED, JUDGEMENT_BUDGET_NAMES, RETIRED_COMPARED
from experiments.study_stats import mean_std, paired_interval, plus_minus

MARGIN = 0.03  # a fixed choice counts at a budget when its measured step ratio is within this above it
BUDGETS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# the schemes the plan compares with the family, ElasticTrainer first, and the retired candidates whose
# results the committed tables hold; everything else in the plan is the family
COMPARED_PREFIXES = tuple(dict.fromkeys(scheme for scheme, _, _ in FRONTIER_COMPARED)) + RETIRED_COMPARED


def final_value(summary: Dict, key: str) -> Optional[float]:
    """The run's final-epoch value: final_test_accuracy, or the last epoch's val_accuracy."""
    if key == "test":
        return summary.get("final_test_accuracy")
    history = summary.get("history") or []
    return history[-1].get("val_accuracy") if history else None


def point(name: str, runs: Sequence[Dict], selection_seeds: Optional[Collection[int]] = None) -> Dict:
    """A config over its seeds: mean step ratio, mean final validation and test accuracy, and each
    seed's (by seed, for paired differences). With `selection_seeds`, the step ratio and the
    validation accuracy that place and rank it are means over those seeds only (the seeds every
    member of the family ran), so that extra seeds of some configs move no choice."""
    ranked = [run for run in runs if selection_seeds is None or run.get("seed") in selection_seeds]
    return {"config": name, "seeds": len(runs),
            "ratio": mean_std([run.get("step_time_ratio_achieved") for run in ranked])[0],
            "val": mean_std([final_value(run, "val") for run in ranked])[0],
            "test": mean_std([final_value(run, "test") for run in runs]),
            "by_seed": {run.get("seed"): final_value(run, "test") for run in runs},
            "val_by_seed": {run.get("seed"): final_value(run, "val") for run in runs}}


def frontier_at(family: Sequence[Dict], budget: float) -> Optional[Dict]:
    """The family's member with the best mean final validation accuracy among those within the
    budget (measured step ratio at most budget + MARGIN); of equal ones, the cheaper. None when
    no member fits or none has a validation accuracy."""
    fitting = [p for p in family if math.isfinite(p["ratio"]) and p["ratio"] <= budget + MARGIN and math.isfinite(p["val"])]
    if not fitting:
        return None
    return max(fitting, key=lambda p: (p["val"], -p["ratio"]))


def paired_differences(scheme: Dict, member: Dict, key: str = "by_seed") -> List[float]:
    """The scheme's final test accuracy (key "val_by_seed": validation accuracy) minus the
    member's, seed by seed, on the seeds both have a value for."""
    seeds = sorted(set(scheme[key]) & set(member[key]))
    return [scheme[key][s] - member[key][s] for s in seeds if scheme[key][s] is not None and member[key][s] is not None]


def paired(scheme: Dict, member: Dict, key: str = "by_seed") -> str:
    """paired_differences' mean with its 95 % interval (text)."""
    differences = paired_differences(scheme, member, key)
    if not differences:
        return "-"
    mean, low, high = paired_interval(differences)
    interval = f" [{100 * low:+.1f}, {100 * high:+.1f}]" if math.isfinite(low) else ""
    return f"{100 * mean:+.1f}{interval} ({len(differences)} seeds)"


def family_seeds(groups: Dict[str, List[Dict]]) -> Set[int]:
    """The seeds every member of the family ran: its members are ranked on these alone, so that
    the decisive rows' extra seeds (study.py run frontier --decisive) do not change the ranking."""
    seeds = [{run.get("seed") for run in runs} for name, runs in groups.items() if not name.startswith(COMPARED_PREFIXES)]
    return set.intersection(*seeds) if seeds else set()


def split(groups: Dict[str, List[Dict]]) -> tuple:
    """(family, compared) points of a plan's results."""
    chosen = family_seeds(groups)
    points = [point(name, runs, chosen) for name, runs in sorted(groups.items())]
    return ([p for p in points if not p["config"].startswith(COMPARED_PREFIXES)],
            [p for p in points if p["config"].startswith(COMPARED_PREFIXES)])


def decisive_configs(groups: Dict[str, List[Dict]]) -> List[str]:
    """The configs that decide the judgement: each compared scheme and the frontier member at its
    measured step ratio (from the results so far)."""
    family, compared = split(groups)
    members = [frontier_at(family, scheme["ratio"]) for scheme in compared if math.isfinite(scheme["ratio"])]
    return sorted({p["config"] for p in compared} | {member["config"] for member in members if member})


def frontier_section(groups: Dict[str, List[Dict]]) -> str:
    """The frontier over a grid of budgets, and each compared scheme beside the frontier at its
    own measured step ratio (markdown)."""
    family, compared = split(groups)
    lines = [f"Frontier (the best fixed choice on final-epoch validation accuracy within a budget + {MARGIN}; "
             f"its final-epoch test accuracy; definition fixed before the runs):", "",
             "| budget | frontier member | its step ratio | its val acc % | its final test acc % |",
             "|---:|---|---:|---:|---:|"]
    for budget in BUDGETS:
        member = frontier_at(family, budget)
        lines.append(f"| {budget:.2f} | " + (f"{member['config']} | {member['ratio']:.2f} | {100 * member['val']:.1f} | "
                                            f"{plus_minus(member['test'], 100)} |" if member else "- | - | - | - |"))
    lines += ["", "| scheme | its step ratio | its final test acc % | its final val acc % | frontier member at that "
              "ratio | frontier's final test acc % | scheme minus frontier, points, paired [95 %] | the same on "
              "validation |", "|---|---:|---:|---:|---|---:|---|---|"]
    for scheme in compared:
        member = frontier_at(family, scheme["ratio"]) if math.isfinite(scheme["ratio"]) else None
        lines.append(f"| {scheme['config']} | {scheme['ratio']:.2f} | {plus_minus(scheme['test'], 100)} | "
                     f"{100 * scheme['val']:.1f} | "
                     + (f"{member['config']} | {plus_minus(member['test'], 100)} | {paired(scheme, member)} | "
                        f"{paired(scheme, member, 'val_by_seed')} |" if member else "- | - | - | - |"))
    against = [(scheme, next((p for p in compared if p["config"] == baseline_of(scheme["config"])), None))
               for scheme in compared if baseline_of(scheme["config"]) != scheme["config"]]
    if against:
        lines += ["", "| scheme | ElasticTrainer at the same budget | step ratios | scheme minus ElasticTrainer, final "
                  "test, points, paired [95 %] | the same on validation |", "|---|---|---|---|---|"]
        for scheme, baseline in against:
            lines.append(f"| {scheme['config']} | " + (
                f"{baseline['config']} | {scheme['ratio']:.2f} vs {baseline['ratio']:.2f} | {paired(scheme, baseline)} | "
                f"{paired(scheme, baseline, 'val_by_seed')} |" if baseline else "- | - | - | - |"))
    seeds = family_seeds(groups)
    lines += ["", f"Members are placed and ranked on the seeds the whole family ran ({', '.join(map(str, sorted(seeds))) or 'none'}); "
              f"step ratios are means over those seeds."]
    return "\n".join(lines) + "\n"


def baseline_of(config: str) -> str:
    """ElasticTrainer's config at the budget of a compared scheme's config (itself for ElasticTrainer)."""
    for prefix in COMPARED_PREFIXES[1:]:
        if config.startswith(prefix):
            return COMPARED_PREFIXES[0] + config[len(prefix):]
    return config


# The rule that judges the candidate selector on a draw (BENCHMARKS.md, "The selector's judgement",
# fixed 2026-11-26 10:07 UTC before its runs); this reading of it was written before any judging
# run was read.
CANDIDATE = "rotating_anchored_training"  # the candidate judged (decided 2026-11-26, 21:56 UTC)
RULE_BUDGETS = JUDGEMENT_BUDGET_NAMES  # "50 %" and 0.7 exact: issue 54's budgets are issue 34's
RULE_SEEDS = 5
TEST_MARGIN = 0.01  # its final test accuracy at least the frontier's minus 1 point
INTERVAL_FLOOR = -0.02  # and the lower end of the paired 95 % interval above -2 points
TIE = 1e-9  # accuracies are multiples of 1/N: an exact tie must not turn on rounding


def overhead_seconds(run: Dict) -> float:
    """A run's selection overhead as the rule counts it: `selection_seconds` (probe, DP; one entry
    a selection) plus `compile_seconds`."""
    selections, compiles = run.get("selection_seconds"), run.get("compile_seconds")
    if selections is None or compiles is None:  # not recorded: unknown, so no clause can hold on it
        return float("nan")
    total = sum(selections) if isinstance(selections, (list, tuple)) else float(selections)
    return float(total) + float(compiles)


def finite_count(values) -> int:
    """How many of the values are finite numbers."""
    return len([v for v in values if v is not None and math.isfinite(v)])


def judgement(groups: Dict[str, List[Dict]], candidate: str = CANDIDATE) -> List[Dict]:
    """The rule, budget by budget, on one draw's results: the candidate against the frontier member
    at its measured step ratio (placed, as the decisive rows were chosen, at its mean over the
    seeds the whole family ran) and against ElasticTrainer at the same budget. Accuracies, step
    ratios and overheads are means over all of each config's seeds. One dict a budget whose
    candidate and ElasticTrainer rows exist: the numbers and `clauses`, a list of (text, met)."""
    family, compared = split(groups)
    points = {p["config"]: p for p in compared}
    verdicts = []
    for budget in RULE_BUDGETS:
        mine, theirs = points.get(f"{candidate}_{budget}"), points.get(f"{COMPARED_PREFIXES[0]}_{budget}")
        if mine is None or theirs is None:
            continue
        member = frontier_at(family, mine["ratio"]) if math.isfinite(mine["ratio"]) else None
        ratio, et_ratio = (mean_std([run.get("step_time_ratio_achieved") for run in groups[p["config"]]])[0]
                           for p in (mine, theirs))
        overhead, et_overhead = (mean_std([overhead_seconds(run) for run in groups[p["config"]]])[0]
                                 for p in (mine, theirs))
        difference = (float("nan"),) * 3 + (0,)
        if member:
            pairs = paired_differences(mine, member)
            difference = paired_interval(pairs) + (len(pairs),)
        frontier_test = member["test"][0] if member else float("nan")
        clauses = [
            (f"final test at least the frontier's minus {100 * TEST_MARGIN:g} point",
             mine["test"][0] >= frontier_test - TEST_MARGIN - TIE),
            (f"paired interval's lower end above {100 * INTERVAL_FLOOR:+g} points", difference[1] > INTERVAL_FLOOR),
            ("final test not below ElasticTrainer's", mine["test"][0] >= theirs["test"][0] - TIE),
            ("step ratio not above ElasticTrainer's", ratio <= et_ratio),
            ("selection overhead not above ElasticTrainer's", overhead <= et_overhead)]
        # the seeds the reading rests on: the candidate's and ElasticTrainer's finite accuracies, and the pairs
        seeds = min(finite_count(mine["by_seed"].values()), finite_count(theirs["by_seed"].values()), difference[3])
        verdicts.append({"budget": budget, "candidate": mine, "member": member, "elastic": theirs,
                         "difference": difference, "ratio": ratio, "elastic_ratio": et_ratio,
                         "placed_at": mine["ratio"], "overhead": overhead, "elastic_overhead": et_overhead,
                         "clauses": clauses, "seeds": seeds,
                         "met": all(met for _, met in clauses) and seeds >= RULE_SEEDS,
                         "above_frontier": difference[1] > 0})
    return verdicts


def judgement_section(groups: Dict[str, List[Dict]], candidate: str = CANDIDATE) -> str:
    """The rule's reading on one draw (markdown): each budget's numbers, each clause met or not."""
    verdicts = judgement(groups, candidate)
    if not verdicts:
        return ""
    mark = {True: "met", False: "**not met**"}
    lines = [f"The rule (BENCHMARKS.md, \"The selector's judgement\") on {candidate}; means over each config's "
             f"seeds; the frontier member is placed at the candidate's step ratio over the family's seeds "
             f"(\"placed at\"), and valued on all of its own:", "",
             "| budget | seeds read | final test % | placed at | frontier member, its final test % | minus frontier, "
             "paired [95 %] | ElasticTrainer's final test % | step ratio (ElasticTrainer's) | overhead s "
             "(ElasticTrainer's) |",
             "|---|---:|---:|---:|---|---|---:|---:|---:|"]
    for v in verdicts:
        mine, member = v["candidate"], v["member"]
        mean, low, high, count = v["difference"]
        lines.append(f"| {v['budget']} | {v['seeds']} | {plus_minus(mine['test'], 100)} | {v['placed_at']:.3f} | "
                     + (f"{member['config']}, {plus_minus(member['test'], 100)} | " if member else "- | ")
                     + (f"{100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}] ({count} seeds) | "
                        if math.isfinite(low) else "- | ")
                     + f"{plus_minus(v['elastic']['test'], 100)} | {v['ratio']:.3f} ({v['elastic_ratio']:.3f}) | "
                     f"{v['overhead']:.1f} ({v['elastic_overhead']:.1f}) |")
    lines += ["", "| budget | " + " | ".join(text for text, _ in verdicts[0]["clauses"]) + " | all, on "
              f"{RULE_SEEDS} seeds | above the frontier (interval above 0) |",
              "|---|" + "---|" * (len(verdicts[0]["clauses"]) + 2)]
    for v in verdicts:
        clauses = all(met for _, met in v["clauses"])
        overall = (mark[v["met"]] if v["met"] or not clauses
                   else f"each clause met, on {v['seeds']} of the {RULE_SEEDS} seeds")
        above = ("no" if not v["above_frontier"] else "yes" if v["seeds"] >= RULE_SEEDS
                 else f"yes, on {v['seeds']} of the {RULE_SEEDS} seeds")
        lines.append(f"| {v['budget']} | " + " | ".join(mark[met] for _, met in v["clauses"])
                     + f" | {overall} | {above} |")
    missing = [budget for budget in RULE_BUDGETS if budget not in {v["budget"] for v in verdicts}]
    if missing:
        lines += ["", f"Not read yet (no {candidate} or ElasticTrainer runs at it): {', '.join(missing)}."]
    return "\n".join(lines) + "\n"
