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

from experiments.study_plans import FRONTIER_COMPARED
from experiments.study_stats import mean_std, paired_interval, plus_minus

MARGIN = 0.03  # a fixed choice counts at a budget when its measured step ratio is within this above it
BUDGETS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# the schemes the plan compares with the family, ElasticTrainer first; everything else in the plan is the family
COMPARED_PREFIXES = tuple(dict.fromkeys(scheme for scheme, _, _ in FRONTIER_COMPARED))


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


def paired(scheme: Dict, member: Dict, key: str = "by_seed") -> str:
    """The scheme's final test accuracy (key "val_by_seed": validation accuracy) minus the
    member's, paired by seed, with its 95 % interval."""
    seeds = sorted(set(scheme[key]) & set(member[key]))
    differences = [scheme[key][s] - member[key][s] for s in seeds
                   if scheme[key][s] is not None and member[key][s] is not None]
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
