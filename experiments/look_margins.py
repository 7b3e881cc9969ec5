"""Could a margin on the look's stage sums have named a better stage? No training: it reads looks
already made and names, for each margin k, the highest (cheapest to reach) stage whose sum is at
least 1/k of the largest (k = 1 is the anchor the candidates name, anchor_of), and marks where that
stage is one the draw gains in (--right, from the stage-alone runs of its frontier table). Two
kinds of records:
- look_reliability's JSON lines (design draws, no training; --variant picks the look, pooled3 is
  the fifteenth to seventeenth candidates');
- selection records (experiments/selection_record.py) of the anchored candidates' runs: the look
  each run made, its anchor/stage<i>_sum at the first selection.

    python -m experiments.look_margins results/study/parts_mobilenetv2_64/look/look_reliability_s0-9.jsonl --right 3
    python -m experiments.look_margins results/study/parts_seed4_mobilenetv2_64/selections/selections.json --right 3

A margin moves the choice toward the top on purpose: a wrong look that names a low stage costs most
(its reach rotates in on few steps and the classifier trains alone on the rest).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Sequence

import numpy as np

from experiments.selection_record import STAGE_SUMS
from schemes.anchored import anchor_of

MARGINS = (1.0, 1.1, 1.2, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0)


def hedged_anchor(sums: Sequence[float], margin: float) -> int:
    """The highest stage whose sum is at least 1/`margin` of the largest (`margin` at least 1);
    anchor_of's choice when no sum is positive (the top) or when `margin` is 1."""
    if margin < 1:
        raise ValueError(f"a margin is at least 1, not {margin}")
    best = anchor_of(sums)
    if margin == 1 or sums[best] <= 0:
        return best
    return max(index for index, value in enumerate(sums) if value >= sums[best] / margin)


class RecordError(ValueError):
    """A record that holds no look this tool can read (the message says which and why)."""


def looks_in(path: str, variant: str) -> Dict[str, List[float]]:
    """Each record's stage sums, by a label: a look_reliability file's seeds (JSON lines, one
    object a seed with its "seed"; the `variant` look) or a selection record's runs (one object,
    run name -> tag -> [[step, value], ...]; the first selection's anchor/stage<i>_sum)."""
    with open(path) as handle:
        text = handle.read()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None  # JSON lines (more than one line) or not JSON
    if isinstance(whole, dict) and "seed" not in whole:
        return selection_looks(whole, path)
    try:
        records = [whole] if isinstance(whole, dict) else [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as error:
        raise RecordError(f"{path} is neither JSON lines nor a JSON object ({error})") from error
    looks = {}
    for record in records:
        if not isinstance(record, dict) or "seed" not in record:
            raise RecordError(f"{path} holds a line that is not a look_reliability record")
        if variant not in record:
            raise RecordError(f"{path}: seed {record['seed']} holds no look {variant!r} (it holds "
                              f"{', '.join(key for key in record if key[:6] in ('paired', 'pooled'))})")
        looks[f"seed {record['seed']}"] = [float(value) for value in record[variant]["sums"]]
    return looks


def selection_looks(selection: Dict, path: str) -> Dict[str, List[float]]:
    """A selection record's looks: each run's anchor/stage<i>_sum at its first selection (runs
    without them, ElasticTrainer's, are left out)."""
    looks = {}
    for run, tags in sorted(selection.items()):
        if not isinstance(tags, dict):
            raise RecordError(f"{path} is not a selection record ({run!r} holds no tags)")
        stages = sorted((int(STAGE_SUMS.fullmatch(tag).group(1)), values[0][1])
                        for tag, values in tags.items() if STAGE_SUMS.fullmatch(tag) and values)
        if stages:
            looks[run] = [value for _, value in stages]
    return looks


def record_label(path: str) -> str:
    """What names a record's looks in the table: the folder it sits two levels under (a draw's
    results folder, as results/study/<draw>/look/ and results/study/<draw>/selections/ are laid out)."""
    return os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path)))) or path


def table(looks: Dict[str, List[float]], right: Sequence[int], margins: Sequence[float] = MARGINS) -> str:
    """One row a look: its sums and, for each margin, the stage named ('+' where it is in `right`),
    then how many looks each margin names right."""
    head = "| look | sums (x 1e-3) | " + " | ".join(f"k={m:g}" for m in margins) + " |"
    rows = [head, "|---|---|" + "---:|" * len(margins)]
    hits = np.zeros(len(margins), int)
    for label, sums in looks.items():
        cells = []
        for column, margin in enumerate(margins):
            stage = hedged_anchor(sums, margin)
            hits[column] += stage in right
            cells.append(f"{stage}{'+' if stage in right else ''}")
        rows.append(f"| {label} | {' '.join(f'{v * 1e3:.2f}' for v in sums)} | " + " | ".join(cells) + " |")
    rows.append(f"| right, of {len(looks)} | | " + " | ".join(str(h) for h in hits) + " |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", help="look_reliability JSON lines files or selection records")
    parser.add_argument("--right", required=True,
                        help="the stages (indices, comma-separated) the draw gains in, from its stage-alone runs")
    parser.add_argument("--variant", default="pooled3", help="the look read from look_reliability records")
    parser.add_argument("--margins", default=",".join(f"{m:g}" for m in MARGINS),
                        help="the margins k to read, comma-separated, each at least 1 (default: %(default)s)")
    parser.add_argument("--only", default="", help="read only the runs or seeds whose label holds this text "
                                                  "(e.g. rho0.7_exact: a seed's two budgets make the same look)")
    args = parser.parse_args(argv)
    try:
        right = [int(stage) for stage in args.right.split(",")]
    except ValueError:
        print(f"error: --right {args.right!r} is not stage indices; pass them comma-separated, like 0,1", file=sys.stderr)
        return 2
    try:
        margins = [float(margin) for margin in args.margins.split(",")]
    except ValueError:
        margins = []
    if not margins or min(margins) < 1:
        print(f"error: --margins {args.margins!r}: pass numbers of at least 1, comma-separated, like 1,1.5,2",
              file=sys.stderr)
        return 2
    looks = {}
    for path in args.records:
        try:
            found = looks_in(path, args.variant)
        except (OSError, RecordError) as error:
            print(f"error: could not read the looks: {error}; pass look_reliability JSON lines files "
                  "or selection records (experiments/selection_record.py)", file=sys.stderr)
            return 2
        for label, sums in found.items():
            name = f"{record_label(path)}: {label}"
            if name in looks:
                print(f"error: two looks are labelled {name!r}; pass records from different draws' folders",
                      file=sys.stderr)
                return 2
            looks[name] = sums
    if not looks:
        print("error: no look in those records (a selection record holds the stage sums only for runs "
              "made by an anchored candidate and recorded after stage sums were added)", file=sys.stderr)
        return 2
    looks = {label: sums for label, sums in looks.items() if args.only in label}
    if not looks:
        print(f"error: no look labelled with {args.only!r} in those records", file=sys.stderr)
        return 2
    stages = {len(sums) for sums in looks.values()}
    if any(not 0 <= stage < min(stages) for stage in right):
        print(f"error: --right {args.right} names a stage these looks do not have (they have {min(stages)}: "
              f"0 to {min(stages) - 1})", file=sys.stderr)
        return 2
    print(table(looks, right, margins))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
