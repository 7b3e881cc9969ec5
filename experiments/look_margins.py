"""Could a margin on the look's stage sums have named a better stage? No training: it reads looks
already made and names, for each margin k, the highest (cheapest to reach) stage whose sum is at
least 1/k of the largest (k = 1 is the anchor the candidates name, anchor_of), and marks where that
stage is one the draw gains in (--right, from the stage-alone runs of its frontier table). Two kinds of records:
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
import re
import sys
from typing import Dict, List, Sequence

import numpy as np

from schemes.anchored import anchor_of

MARGINS = (1.0, 1.1, 1.2, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0)


def hedged_anchor(sums: Sequence[float], margin: float) -> int:
    """The highest stage whose sum is at least 1/`margin` of the largest; anchor_of's choice when
    no sum is positive (the top) or when `margin` is 1."""
    best = anchor_of(sums)
    if sums[best] <= 0:
        return best
    return max(index for index, value in enumerate(sums) if value >= sums[best] / margin)


def looks_in(path: str, variant: str) -> Dict[str, List[float]]:
    """Each record's stage sums, by a label: a look_reliability file's seeds (JSON lines, the
    `variant` look) or a selection record's runs (the first selection's anchor/stage<i>_sum)."""
    with open(path) as handle:
        text = handle.read()
    try:
        records = json.loads(text)
    except json.JSONDecodeError:
        records = None
    if isinstance(records, dict):  # a selection record: run name -> tag -> [[step, value], ...]
        looks = {}
        for run, tags in sorted(records.items()):
            stages = sorted((int(re.fullmatch(r"anchor/stage(\d+)_sum", tag).group(1)), values[0][1])
                            for tag, values in tags.items() if re.fullmatch(r"anchor/stage(\d+)_sum", tag))
            if stages:
                looks[run] = [value for _, value in stages]
        return looks
    looks = {}
    for line in text.splitlines():
        if line.strip():
            record = json.loads(line)
            looks[f"seed {record['seed']}"] = list(record[variant]["sums"])
    return looks


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
    parser.add_argument("--only", default="", help="read only the runs or seeds whose label holds this text "
                                                  "(e.g. rho0.7_exact: a seed's two budgets make the same look)")
    args = parser.parse_args(argv)
    try:
        right = [int(stage) for stage in args.right.split(",")]
        looks = {}
        for path in args.records:
            looks.update({f"{path.split('/')[-3] if path.count('/') >= 2 else path}: {label}": sums
                          for label, sums in looks_in(path, args.variant).items()})
    except (OSError, ValueError, KeyError) as error:
        print(f"error: could not read the looks ({error}); pass look_reliability JSON lines files or "
              "selection records, and --right as stage indices like 0,1", file=sys.stderr)
        return 2
    if not looks:
        print("error: no look in those records (a selection record holds the stage sums only for runs "
              "made by an anchored candidate and recorded after stage sums were added)", file=sys.stderr)
        return 2
    looks = {label: sums for label, sums in looks.items() if args.only in label}
    if not looks:
        print(f"error: no look labelled with {args.only!r} in those records", file=sys.stderr)
        return 2
    print(table(looks, right))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
