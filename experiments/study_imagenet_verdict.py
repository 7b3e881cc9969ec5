"""Issue 74's verdict in one table: a row for each cell that has run, both backbones, design and fresh draws,
read from the cells' committed runs as their own tables read them (study_imagenet.cell_table):

    python scripts/study.py table imagenet --task verdict     # -> results/imagenet_regime/verdict.md

(a) ElasticTrainer "50 %" against full training at equal epochs (the head its rule chose: a design cell's (a) ran
both where the group's head is zeros), and at each deadline the selective scheme whose paired difference from
full training has the highest lower end (the goal's reading at 0.6). A fresh draw's row also says whether the goal's
two clauses are met there, read as study_imagenet.goal_lines reads them (equal_epoch_reading,
deadline_reading).
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from experiments import study_deadline
from experiments.study_imagenet import (
    ELASTIC_ROWS, ET_GLOROT, GOAL_SHARE, GROUPS, RESULTS, VERDICT, cell_plan, cell_runs, cells, choice,
    deadline_met, deadline_reading, elastic_head, equal_epoch_reading, finished, interval, judged, ran)

BACKBONE_NAMES = {"imagenet": "ImageNet", "source": "source task"}
DRAW_NAMES = {"parts": "embedded_parts", "shapes": "embedded_shapes", "fashion": "Fashion-MNIST 100 a class",
              "parts8": "embedded_parts_seed8", "shapes6": "embedded_shapes_seed6", "fashion1": "Fashion-MNIST, draw 1"}
SHORT = {"elastic_training 50 %": "ET \"50 %\"", "elastic_training 0.7": "ET 0.7",
         "gain_stage_training 50 %": "gain_stage \"50 %\"", "static_top_training 0.5": "static top 0.5"}


def elastic_row(cell: str, done: Dict[str, Dict]) -> str:
    """The (a) row of ElasticTrainer with the head its rule chose: a fresh cell's runs carry their design cell's
    choice; on a design cell whose group's head is zeros, glorot's row when elastic_head chose it."""
    group = cells()[cell][0]
    pair = choice(finished(RESULTS, group), group)
    if judged(cell) or pair is None or pair[1] == "glorot":
        return ELASTIC_ROWS[0]
    return ET_GLOROT if elastic_head(done, pair) == "glorot" else ELASTIC_ROWS[0]


def best_at(runs: Dict[str, Dict[int, Dict]], seeds: Sequence[int]
            ) -> Optional[Tuple[str, Optional[Tuple[float, float, float]]]]:
    """At one deadline: full training's accuracy and the selective scheme with the highest paired lower end against
    it, among those the goal counts there (study_imagenet.deadline_reading), as text, and that paired difference
    (None when none counts); None until every seed of full training and of each selective scheme has finished."""
    reading = deadline_reading(runs, seeds)
    if reading is None:
        return None
    differences, left_out = reading
    best = max(differences, key=lambda row: differences[row][1]) if differences else None
    text = (study_deadline.mean_std([run["final_test_accuracy"] for run in ran(runs["full_training"]).values()]) + "; "
            + (f"{SHORT[best]} {interval(differences[best])}" if best else "none ran")
            + (f" ({', '.join(f'{SHORT[row]} {why}' for row, why in left_out.items())})" if left_out else ""))
    return text, differences[best] if best else None


def cell_row(cell: str) -> Optional[str]:
    """The cell's line of the verdict table, or None until every seed of its equal-epoch runs has finished."""
    group, draw = cells()[cell]
    done = finished(RESULTS, cell)
    seeds = cell_plan(cell)[0]
    table = cell_runs(cell, done)
    full, elastic = table["e12"]["full_training"], table["e12"][elastic_row(cell, done)]
    if len(full) < len(seeds) or len(elastic) < len(seeds):
        return None
    difference, speed, met = equal_epoch_reading(full, elastic)
    at = {fraction: best_at(table.get(f"b{fraction:g}", {}), seeds) for fraction in (GOAL_SHARE, 0.4)}
    goal = "-"
    if judged(cell) and at[GOAL_SHARE]:
        best = at[GOAL_SHARE][1]
        goal = (f"(a) {'met' if met else 'not met'}; "
                f"{GOAL_SHARE:g} {'met' if best is not None and deadline_met(best) else 'not met'}")
    backbone, size, _ = GROUPS[group]
    return (f"| {BACKBONE_NAMES[backbone]} | {size} | {DRAW_NAMES[draw]}{'' if judged(cell) else ' (design)'} | "
            f"{len(seeds)} | {study_deadline.mean_std([run['final_test_accuracy'] for run in full.values()])} in "
            f"{np.mean([run['train_seconds'] for run in full.values()]):.0f} s | {interval(difference)} "
            f"({elastic[seeds[0]]['config']['head_init']}) | {speed:.2f}x | "
            + " | ".join(at[f][0] if at[f] else "-" for f in (GOAL_SHARE, 0.4)) + f" | {goal} |")


def verdict_table(output: Optional[str] = None) -> None:
    """Write results/imagenet_regime/verdict.md (or `output`): a row per cell whose equal-epoch runs have finished,
    each group's design draws before its fresh ones."""
    lines = ["# Issue 74's verdict: EfficientNet-Lite0 from ImageNet and from the source task", "",
             "Final-epoch test accuracy (%), mean ± std over seeds; differences paired by seed with their 95 % "
             "interval. (a): ElasticTrainer \"50 %\" (`--rho 0.533 --rho_mode paper`) minus full training, both 12 "
             "epochs, with the head its rule chose; speed: full training's mean training seconds over ElasticTrainer's. "
             "At 0.6 and 0.4 of full training's 12-epoch time: full training planned for the deadline, then the "
             "selective scheme (ElasticTrainer \"50 %\" or 0.7, gain_stage \"50 %\", static top 0.5) whose difference "
             "from it has the highest lower end. Fresh draws are judged once, 5 seeds, by the rule committed before "
             "their first run (docs/notebook/imagenet_regime_74.md): (a) is met by a mean within 1 point at >= 1.8x, "
             "0.6 by a lower end above -1. Each cell's full table: results/imagenet_regime/<cell>.md.", "",
             "| backbone | px | draw | seeds | full training, 12 epochs | (a) ET \"50 %\" − full (head) | speed | "
             "at 0.6: full; the selective with the highest lower end | at 0.4: the same | goal |",
             "|---|---:|---|---:|---|---|---:|---|---|---|"]
    order = sorted(cells(), key=lambda cell: (list(GROUPS).index(cells()[cell][0]), judged(cell)))
    rows = {cell: cell_row(cell) for cell in order}
    lines += [row for row in rows.values() if row]
    lines += ["", "Not run yet (or not every seed of its equal-epoch runs): "
              + (", ".join(cell for cell, row in rows.items() if not row) or "none"), "",
              f"Made by `python scripts/study.py table imagenet --task {VERDICT}` from the cells' runs "
              "(results/imagenet_regime/<cell>/runs/); each cell's table names its runs' code."]
    study_deadline.publish(lines, os.path.join(RESULTS, f"{VERDICT}.md") if output is None else output)
