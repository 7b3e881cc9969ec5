"""What a run's selections were, from its TensorBoard events: each selection's anchor (and the
look's sum over each stage it was named on), rotation shares, selected fraction, predicted step
ratio and drift read, as a small JSON file to commit next to the run summaries, in a folder of its
own (the study tables read every JSON file of a summaries folder as a run summary); the event logs
themselves stay out of git.

    python -m experiments.selection_record LOGDIR/RUN [LOGDIR/RUN ...] --output FILE.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
from typing import Dict, List

from utils import atomic_write_json

TAGS = ("anchor/first_block", "anchor/stop_block", "rotation/on", "rotation/whole_share", "rotation/reach_share",
        "rotation/head_share", "elastic/selected_fraction", "elastic/predicted_rho", "elastic/correction",
        "elastic/drift_measured", "elastic/drift")
STAGE_SUMS = re.compile(r"anchor/stage(\d+)_sum")  # the look's total over stage i (schemes/anchored.py)


def selections(run_dir: str) -> Dict[str, List]:
    """Each recorded tag's (step, value) pairs, in step order, by the names the schemes give them
    (shares and fractions as fractions, however TensorBoard shows them)."""
    from experiments.plot import Run

    run = Run(run_dir)
    names = TAGS + tuple(sorted(name for name in run.tags if STAGE_SUMS.fullmatch(name)))
    return {name: [[step, value] for step, value in run.series(name)] for name in names if name in run.tags}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run folders (a run's TensorBoard logs)")
    parser.add_argument("--output", required=True, help="the JSON file to write (atomically)")
    args = parser.parse_args(argv)
    atomic_write_json(args.output, {os.path.basename(os.path.normpath(run)): selections(run) for run in args.runs})
    print(f"wrote {args.output} ({len(args.runs)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
