"""The rule's reading on a judging draw (BENCHMARKS.md, "The selector's judgement"), with the judged
candidate's runs taken from another folder of the draw: what a variant of the candidate (the same
scheme with another flag) reads against the judgement's own family and ElasticTrainer runs. A
description, not a judgement: the draw has been seen. No training: it reads run summaries.

    python -m experiments.reread --draw parts_seed4 --folder look12_check \\
        --config open_loop_anchored_training_look12
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

from experiments.study_frontier import RULE_BUDGETS, judgement_section
from experiments.study_plans import JUDGED
from experiments.study_table import load_results
from utils import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def reread(directory: str, folder: str, config: str, candidate: str, seeds: Optional[Sequence[int]] = None) -> str:
    """The rule's reading (study_frontier.judgement_section) of `directory`'s frontier runs with
    the runs of `candidate` at each budget replaced by those of `config` in `directory`/`folder`
    (at a budget the folder lacks, the candidate's row is left out). With `seeds`, only the runs
    of those seeds are replaced; the candidate's own runs of the other seeds stay."""
    for needed in ("frontier", folder):
        if not os.path.isdir(os.path.join(directory, needed)):
            raise UserError(f"no folder {os.path.join(directory, needed)}")
    groups = load_results(os.path.join(directory, "frontier"))
    variant = load_results(os.path.join(directory, folder))
    found = {budget: variant[f"{config}_{budget}"] for budget in RULE_BUDGETS if f"{config}_{budget}" in variant}
    if seeds is not None:
        for budget, runs in found.items():
            missing = sorted(set(seeds) - {run.get("seed") for run in runs})
            if missing:
                raise UserError(f"{os.path.join(directory, folder)} has no run of {config}_{budget} for seeds {missing}")
        found = {budget: sorted([run for run in groups.get(f"{candidate}_{budget}", []) if run.get("seed") not in seeds]
                                + [run for run in runs if run.get("seed") in seeds], key=lambda run: run.get("seed", 0))
                 for budget, runs in found.items()}
    if not found:
        have = ", ".join(sorted(variant)) or "no runs"
        raise UserError(f"{os.path.join(directory, folder)} has no runs of {config} at "
                        f"{' or '.join(RULE_BUDGETS)} (it has: {have})")
    for budget in RULE_BUDGETS:
        groups.pop(f"{candidate}_{budget}", None)
        if budget in found:
            groups[f"{candidate}_{budget}"] = found[budget]
    replaced = "every seed's runs" if seeds is None else (
        f"the runs of seeds {sorted(seeds)} (the others are the judged runs, so the step ratio and the overhead "
        "mix two batches of runs and say nothing)")
    return (f"{candidate}'s rows: {config} from {folder}, {replaced}. A description, not a judgement.\n\n"
            + judgement_section(groups, candidate))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draw", choices=sorted(JUDGED), required=True, help="a judging draw")
    parser.add_argument("--folder", required=True, help="the folder of results/study/<draw>_mobilenetv2_64 "
                        "holding the variant's runs")
    parser.add_argument("--config", required=True, help="the variant's config name, its run names without "
                        "_rho<budget>_s<seed> (e.g. open_loop_anchored_training_look12)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="replace only these seeds' runs (the "
                        "judged candidate's own stay for the others); default: every seed")
    args = parser.parse_args(argv)
    directory = os.path.join(ROOT, "results", "study", f"{args.draw}_mobilenetv2_64")
    try:
        print(reread(directory, args.folder, args.config, JUDGED[args.draw], args.seeds))
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
