"""The design gate of issue 34's candidates on a design draw: each budget's cell read from the folder
its runs went to, against ElasticTrainer run beside it and the frontier placed at the candidate's
step ratio (docs/benchmarks/regime_and_depth.md, "A fifteenth candidate", **Read**). On validation
accuracy at the final epoch: at least the frontier's minus 1 point, at least ElasticTrainer's; step
ratio (`step_time_ratio_achieved`) and selection overhead (`selection_seconds` + `compile_seconds`)
not above ElasticTrainer's; means over each config's seeds. The frontier's members are ranked on
the family's seeds (results/study/<draw>/frontier/); the paired intervals are over the seeds both
ran. No training: it reads run summaries.

    python -m experiments.design_gate --task parts \\
        --cell rho0.533_paper=whole_stage_anchored_training:sixteenth_check \\
        --cell rho0.7_exact=open_loop_anchored_training:seventeenth_check
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from experiments import study_frontier as frontier
from experiments.study_stats import mean_std
from experiments.study_table import load_results
from utils import UserError

TASKS = {"parts": "parts_mobilenetv2_64", "shapes": "mobilenetv2_64"}  # the design draws' result folders
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VAL_MARGIN = 0.01  # at least the frontier's minus 1 point, on validation


def gate_cell(family: Sequence[Dict], candidate: str, runs: Sequence[Dict], elastic: Sequence[Dict]) -> Dict:
    """One budget's reading: the candidate's and ElasticTrainer's points, the frontier member at the
    candidate's mean step ratio, the paired differences on validation and on final test (text,
    study_frontier.paired), the overheads, and `clauses`, a list of (text, met)."""
    mine, theirs = frontier.point(candidate, runs), frontier.point("elastic_training", elastic)
    member = frontier.frontier_at(family, mine["ratio"]) if math.isfinite(mine["ratio"]) else None
    overhead, et_overhead = (mean_std([frontier.overhead_seconds(run) for run in group])[0] for group in (runs, elastic))
    tie = frontier.TIE
    clauses = [("validation at least the frontier's minus 1 point",
                member is not None and mine["val"] >= member["val"] - VAL_MARGIN - tie),
               ("validation not below ElasticTrainer's", mine["val"] >= theirs["val"] - tie),
               ("step ratio not above ElasticTrainer's", mine["ratio"] <= theirs["ratio"]),
               ("selection overhead not above ElasticTrainer's", overhead <= et_overhead)]
    return {"candidate": mine, "elastic": theirs, "member": member, "overhead": overhead, "elastic_overhead": et_overhead,
            "minus_elastic_val": frontier.paired(mine, theirs, "val_by_seed"),
            "minus_elastic_test": frontier.paired(mine, theirs),
            "minus_frontier_val": frontier.paired(mine, member, "val_by_seed") if member else "-",
            "clauses": clauses, "met": all(met for _, met in clauses)}


def parse_cell(text: str) -> Tuple[str, str, str]:
    """BUDGET=SCHEME:FOLDER (e.g. rho0.7_exact=open_loop_anchored_training:seventeenth_check)."""
    try:
        budget, rest = text.split("=", 1)
        scheme, folder = rest.split(":", 1)
    except ValueError:
        raise UserError(f"--cell {text!r}: expected BUDGET=SCHEME:FOLDER, e.g. "
                        "rho0.7_exact=open_loop_anchored_training:seventeenth_check") from None
    return budget, scheme, folder


def percent(value: float) -> str:
    return f"{100 * value:.1f}" if value is not None and math.isfinite(value) else "-"


def report(task: str, cells: Sequence[Tuple[str, str, str]], root: Optional[str] = None) -> Tuple[str, bool]:
    """The gate's table for one design draw (markdown) and whether every cell met every clause
    (`root`: the repository whose results/study it reads; this one by default)."""
    base = os.path.join(root or ROOT, "results", "study", TASKS[task])
    family, _ = frontier.split(load_results(os.path.join(base, "frontier")))
    if not family:
        raise UserError(f"no frontier family in {base}/frontier: the gate places the frontier from its runs")
    lines = [f"{task}: validation % at the final epoch (ElasticTrainer's in brackets); means over each config's seeds", "",
             "| budget | candidate (folder) | seeds | step ratio | val % | minus ET, val [95 %] | frontier member, "
             "minus it, val [95 %] | final test % | minus ET, test [95 %] | overhead s | clauses |",
             "|---|---|---:|---:|---:|---|---|---:|---|---:|---|"]
    met_all = True
    for budget, scheme, folder in cells:
        groups = load_results(os.path.join(base, folder))
        runs, elastic = groups.get(f"{scheme}_{budget}", []), groups.get(f"elastic_training_{budget}", [])
        if not runs or not elastic:
            raise UserError(f"{base}/{folder} has {len(runs)} runs of {scheme}_{budget} and {len(elastic)} of "
                            f"elastic_training_{budget}: the gate reads both")
        cell = gate_cell(family, scheme, runs, elastic)
        mine, theirs, member = cell["candidate"], cell["elastic"], cell["member"]
        missed = [text for text, met in cell["clauses"] if not met]
        marks = f"all {len(cell['clauses'])} met" if not missed else "NOT MET: " + "; ".join(missed)
        met_all = met_all and cell["met"]
        lines.append(f"| {budget} | {scheme} ({folder}) | {len(runs)}/{len(elastic)} | {mine['ratio']:.3f} "
                     f"({theirs['ratio']:.3f}) | {percent(mine['val'])} ({percent(theirs['val'])}) | "
                     f"{cell['minus_elastic_val']} | "
                     + (f"{member['config']}, {cell['minus_frontier_val']}" if member else "none fits")
                     + f" | {percent(mine['test'][0])} ({percent(theirs['test'][0])}) | {cell['minus_elastic_test']} | "
                     f"{cell['overhead']:.2f} ({cell['elastic_overhead']:.2f}) | {marks} |")
    return "\n".join(lines), met_all


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), required=True, help="the design draw (task seed 0)")
    parser.add_argument("--cell", action="append", required=True, metavar="BUDGET=SCHEME:FOLDER",
                        help="a budget's cell: the candidate's runs and ElasticTrainer's beside them, in "
                             "results/study/<draw>/FOLDER (repeat for each budget)")
    args = parser.parse_args(argv)
    try:
        text, met = report(args.task, [parse_cell(cell) for cell in args.cell])
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(text)
    print("\nevery clause met in every cell" if met else "\nnot every clause met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
