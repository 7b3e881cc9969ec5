"""Replay a sequential look from recorded pair products (`look_variants estimators` records them
as `pairs`: for each stage, every probe batch's gradient times every validation batch's, at the
run's first weights). The look starts with `start` probe and validation batches and adds `step`
more of each while the two best stages' scores do not separate (the gap over its jackknife
standard error below `z`), up to `most`; it names the stage with the largest positive score, as
the anchored candidates do. How often is it right, and how many batches does it add? No training.

    python -m experiments.look_sequential results/study/*/look/look_pairs_s0-*.jsonl --z 1 2 3 --step 1 3

Right: blocks 7-13 (stage 3) on the parts draws, blocks 0-3 (stages 0 and 1) on the shapes draws
(results/study/*/frontier.md). A pair of batches costs about SECONDS_PER_PAIR in a run.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Sequence, Tuple

import numpy as np

# what one more probe batch and validation batch added to the look in the runs of 2026-11-27,
# 16:01-16:25 UTC (the look of 12 took 1.78-1.91 s, the look of 3 0.57-0.64 s: 1.2-1.3 s for 9 pairs)
SECONDS_PER_PAIR = 0.135


def named(scores: Sequence[float]) -> int:
    """The stage with the largest positive score, the last stage when none is (schemes.anchored.anchor_of)."""
    best = int(np.argmax(scores))
    return best if scores[best] > 0 else len(scores) - 1


def scores(pairs: np.ndarray, count: int) -> np.ndarray:
    """Each stage's score on the first `count` batches a side: the mean of its pair products."""
    return pairs[:, :count, :count].mean(axis=(1, 2))


def separation(pairs: np.ndarray, count: int) -> float:
    """The gap between the two best stages' scores on `count` batches a side over its jackknife
    standard error (leaving out probe batch i and validation batch i together); infinite when the
    left-out gaps do not vary, 0 below two batches."""
    if count < 2:
        return 0.0
    full = scores(pairs, count)
    first, second = np.argsort(full)[::-1][:2]
    gaps = []
    for left_out in range(count):
        kept = [k for k in range(count) if k != left_out]
        part = pairs[:, kept][:, :, kept].mean(axis=(1, 2))
        gaps.append(part[first] - part[second])
    gaps = np.array(gaps)
    variance = (count - 1) / count * float(np.sum((gaps - gaps.mean()) ** 2))
    return (full[first] - full[second]) / np.sqrt(variance) if variance > 0 else float("inf")


def sequential(pairs: np.ndarray, z: float, step: int, start: int = 3, most: int = 12) -> Tuple[int, int]:
    """(the stage named, the batches a side it took): `start` first, `step` more while the two best
    stages do not separate by `z`, never more than `most`."""
    count = start
    while count < most and separation(pairs, count) < z:
        count = min(most, count + step)
    return named(list(scores(pairs, count))), count


def fixed(pairs: np.ndarray, count: int) -> Tuple[int, int]:
    """(the stage named, `count`): the look of `count` batches a side."""
    return named(list(scores(pairs, count))), count


def right_stages(task: str) -> set:
    """Where the gain lives on a draw: blocks 7-13 on the parts draws, blocks 0-3 on the shapes draws."""
    return {3} if task.startswith("parts") else {0, 1}


def load(paths: Sequence[str], most: int) -> List[Dict]:
    """Records with pair products of at least `most` batches a side, from JSON lines files
    (ValueError naming the file and line of the first that is not one, or when there are none)."""
    records = []
    for path in paths:
        with open(path) as handle:
            for number, line in enumerate(handle, start=1):
                where = f"{path}:{number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{where} is not JSON ({error.msg})") from None
                if not isinstance(record, dict) or "pairs" not in record or "task" not in record:
                    raise ValueError(f"{where} has no task or no pair products: make the records with "
                                     "python -m experiments.look_variants estimators --output FILE")
                recorded = min(len(record["pairs"][0]), len(record["pairs"][0][0]))
                if recorded < most:
                    raise ValueError(f"{where} holds {recorded} batches a side, fewer than --most {most}")
                records.append(record)
    if not records:
        raise ValueError(f"no records in {', '.join(paths)}")
    return records


def table(records: Sequence[Dict], zs: Sequence[float], steps: Sequence[int], start: int, most: int) -> str:
    """For each rule, each draw's right count and the mean pairs it added a seed (markdown)."""
    tasks = list(dict.fromkeys(record["task"] for record in records))
    lines = ["| rule | " + " | ".join(tasks) + " | right | most added on a draw, s (seed mean) |",
             "|---|" + "---|" * len(tasks) + "---:|---:|"]
    rules = [("fixed", start, 0)] + [("fixed", most, 0)] + [("z", z, step) for z in zs for step in steps]
    for kind, value, step in rules:
        cells, right, worst = [], 0, 0.0
        for task in tasks:
            mine = [record for record in records if record["task"] == task]
            results = [fixed(np.array(record["pairs"]), value) if kind == "fixed"
                       else sequential(np.array(record["pairs"]), value, step, start, most) for record in mine]
            hits = sum(stage in right_stages(task) for stage, _ in results)
            added = np.mean([count - start for _, count in results])
            right += hits
            worst = max(worst, added * SECONDS_PER_PAIR)
            cells.append(f"{hits}/{len(mine)}, +{added:.1f}")
        label = f"{value} a side" if kind == "fixed" else f"z {value:g}, step {step}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {right}/{len(records)} | {worst:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+", help="JSON lines files of look_variants estimators records")
    parser.add_argument("--z", type=float, nargs="+", default=[1.0, 2.0, 3.0], help="separation thresholds")
    parser.add_argument("--step", type=int, nargs="+", default=[1, 3], help="batches a side added at a time")
    parser.add_argument("--start", type=int, default=3, help="batches a side the look starts with")
    parser.add_argument("--most", type=int, default=12, help="batches a side it may take at most")
    args = parser.parse_args(argv)
    if not 1 <= args.start <= args.most or min(args.step) < 1:
        parser.error("need 1 <= --start <= --most and every --step at least 1")
    try:
        records = load(args.records, args.most)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(table(records, args.z, args.step, args.start, args.most))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
