"""Why does the anchored candidates' look name the wrong stage on some run seeds, and what would
name the right one? Each mode builds a run seed's run as main.py does (look_reliability.build: the
fourteenth's, rho 0.7 exact), takes the batches its look would take, and names the anchor (the stage
with the largest positive sum) under other looks, without training the run:

- warm: the pooled looks of 3 and 12 after the classifier alone has trained some steps;
- sizes: the pooled looks of 3, 6 and 12 on the same images at lower input sizes;
- estimators: other estimates from the same per-batch gradients at the run's first weights
  (with --deterministic, through a forward pass without augmentation and dropout), and every
  probe-by-validation product by stage, from which experiments.look_sequential replays a look
  that adds batches while the stages do not separate;
- trajectory: a look made of the run's first steps trained whole, each step's gradients scored
  by the other steps'.

    python -m experiments.look_variants estimators --task parts --seeds 0-9 --output looks.jsonl

Read in docs/benchmarks/regime_and_depth.md, "Why the look errs". The stage where the gain lives:
blocks 7-13 (stage 3) on the parts draws, blocks 0-3 (stages 0-1) on the shapes draws
(results/study/*/frontier.md).
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from typing import Callable, Dict, Iterator, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from experiments.look_reliability import SEEN, TASKS, build, run_flags
from run_outputs import provenance
from schemes.anchored import anchor_of, stage_sums
from schemes.elastic import ImportanceProbe
from train_step import preserved_state
from utils import UserError


def append_record(output: str, record: Dict) -> None:
    """Append one seed's record, whole, to a JSON lines file (nothing without `output`)."""
    if output:
        with open(output, "a") as handle:
            handle.write(json.dumps(record) + "\n")


def seed_range(text: str) -> range:
    """"first-last" (inclusive) as a range; argparse's error for anything else."""
    try:
        first, last = (int(x) for x in text.split("-"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected run seeds as first-last, e.g. 0-9, not {text!r}") from None
    if last < first:
        raise argparse.ArgumentTypeError(f"the last seed cannot come before the first: {text!r}")
    return range(first, last + 1)


def numbers(least: int) -> Callable[[str], List[int]]:
    """An argparse type: a comma-separated list of whole numbers, each at least `least`."""
    def parse(text: str) -> List[int]:
        try:
            values = [int(x) for x in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, e.g. 0,30,60, not {text!r}") from None
        if min(values) < least:
            raise argparse.ArgumentTypeError(f"each number must be at least {least}: {text!r}")
        return values
    return parse


def looked_runs(task: str, seeds: Sequence[int]) -> Iterator[Tuple]:
    """For each run seed: its run built as main.py builds it (look_reliability.build, in a
    temporary log directory), the first 12 probe and 12 validation batches its look would take,
    and the seed's record begun (task, seed, provenance)."""
    for seed in seeds:
        with tempfile.TemporaryDirectory() as logdir:
            loop = build(task, seed, logdir)
            updates, scored = loop.scheme.probe_batches(12), loop.scheme.scored_batches(12)
            yield loop, updates, scored, {"task": task, "seed": seed,
                                          "provenance": provenance(run_flags(task, seed, "-"), loop.config.weights)}


def warm_looks(task: str, seeds: Sequence[int], warm: Sequence[int], output: str) -> int:
    """For each run seed, the pooled looks of 3 and of 12 batches (the same probe and validation
    batches each time) after the classifier alone has trained `warm` steps of the run's first
    training batches, as the run's own classifier steps would (its optimizer, its schedule): does a
    look through a trained classifier name the stage where the gain lives more often than one
    through the classifier's random initialisation?"""
    records = []
    for loop, updates, scored, record in looked_runs(task, seeds):
        scheme = loop.scheme
        probe, block_of, stages = scheme.probe, scheme.block_of, scheme.stages
        head = loop.steps.get(scheme._head)
        batches = (batch for epoch in range(loop.config.num_epochs) for batch in loop.epochs.epoch(epoch))
        record["warm"] = {}
        trained = 0
        for steps in warm:
            for images, labels in itertools.islice(batches, steps - trained):
                head(images, labels)
            trained = steps
            looks = {}
            for count in (3, 12):
                sums = stage_sums(probe.pooled_loss_change(updates[:count], scored[:count]), block_of, stages)
                looks[f"pooled{count}"] = {"sums": sums, "anchor": anchor_of(sums)}
            record["warm"][str(steps)] = looks
        print(record["seed"], " ".join(f"{w}:{looks['pooled3']['anchor']}/{looks['pooled12']['anchor']}"
                             for w, looks in record["warm"].items()), flush=True)
        append_record(output, record)
        records.append(record)
    print(f"anchors (pooled 3 / pooled 12) by classifier steps before the look; stages {list(stages)}:")
    for steps in warm:
        print(f"  {steps:4d}: " + " ".join(f"{r['warm'][str(steps)]['pooled3']['anchor']}/"
                                          f"{r['warm'][str(steps)]['pooled12']['anchor']}" for r in records))
    return 0


def stage_vectors(gradients: Sequence[np.ndarray], block_of: np.ndarray, stages) -> List[np.ndarray]:
    """Each stage's gradients as one flat vector (its blocks' tensors, forward order)."""
    return [np.concatenate([gradients[k].ravel().astype(np.float64)
                            for k in np.flatnonzero((block_of >= first) & (block_of < stop))])
            for first, stop in stages]


def estimates(probe_grads: List[List[np.ndarray]], val_grads: List[List[np.ndarray]], block_of: np.ndarray,
              stages) -> Dict[str, List[float]]:
    """Stage scores from per-batch gradients at the same weights (no update): `dot`, the mean probe
    gradient against the mean validation gradient (the pooled look without its update's curvature);
    `ustat`, the mean over every ordered pair of distinct batches of either kind; `cos`, the cosine
    between each stage's mean probe and mean validation gradient."""
    probe = [stage_vectors(g, block_of, stages) for g in probe_grads]
    val = [stage_vectors(g, block_of, stages) for g in val_grads]
    mean_p = [np.mean([b[s] for b in probe], axis=0) for s in range(len(stages))]
    mean_v = [np.mean([b[s] for b in val], axis=0) for s in range(len(stages))]
    every = probe + val
    n = len(every)
    ustat = []
    for s in range(len(stages)):
        total = np.sum([b[s] for b in every], axis=0)
        ustat.append(float((total @ total - sum(b[s] @ b[s] for b in every)) / (n * (n - 1))))
    return {"dot": [float(p @ v) for p, v in zip(mean_p, mean_v)], "ustat": ustat,
            "cos": [float(p @ v / (np.linalg.norm(p) * np.linalg.norm(v) + 1e-30)) for p, v in zip(mean_p, mean_v)]}


def pair_products(probe_grads: List[List[np.ndarray]], val_grads: List[List[np.ndarray]], block_of: np.ndarray,
                  stages) -> List[List[List[float]]]:
    """For each stage, the product of every probe batch's gradient with every validation batch's
    (a probe-by-validation matrix, in batch order): `dot` over the first n of each is the mean of
    its top-left n-by-n block, and a look that adds batches only while the stages' scores do not
    yet separate can be replayed from it."""
    probe = [stage_vectors(g, block_of, stages) for g in probe_grads]
    val = [stage_vectors(g, block_of, stages) for g in val_grads]
    return [(np.array([p[s] for p in probe]) @ np.array([v[s] for v in val]).T).tolist() for s in range(len(stages))]


def estimator_looks(task: str, seeds: Sequence[int], output: str, deterministic: bool = False) -> int:
    """For each run seed, the gradients of every tensor on each of the run's first 12 probe and 12
    validation batches at the run's first weights, and from them, for the first 3 and all 12 of
    each, the stage scores of `estimates`; beside them the pooled looks of 3 and 12 (the update's
    look, the seventeenth's at 3), and every probe-by-validation product (pair_products). Which
    names the stage where the gain lives, on how many seeds?
    `deterministic`: all of them through a forward pass without augmentation and dropout; `run3`
    is then the seventeenth's own look first, as its run makes it (with them)."""
    records = []
    for loop, updates, scored, record in looked_runs(task, seeds):
        scheme = loop.scheme
        probe, block_of, stages = scheme.probe, scheme.block_of, scheme.stages
        record["deterministic"] = deterministic
        if deterministic:
            sums = stage_sums(probe.pooled_loss_change(updates[:3], scored[:3]), block_of, stages)
            record["run3"] = {"sums": sums, "anchor": anchor_of(sums)}
            model = scheme.context.model
            probe = ImportanceProbe(model, probe.optimizer, lambda images: model(images, training=False))
        grads = {name: [[g.numpy() for g in probe._gradients(*batch)] for batch in batches]
                 for name, batches in (("probe", updates), ("val", scored))}
        record["pairs"] = pair_products(grads["probe"], grads["val"], block_of, stages)
        for count in (3, 12):
            for name, sums in estimates(grads["probe"][:count], grads["val"][:count], block_of, stages).items():
                record[f"{name}{count}"] = {"sums": sums, "anchor": anchor_of(sums)}
            sums = stage_sums(probe.pooled_loss_change(updates[:count], scored[:count]), block_of, stages)
            record[f"pooled{count}"] = {"sums": sums, "anchor": anchor_of(sums)}
        names = [k for k in record if k[-1].isdigit()]
        print(record["seed"], " ".join(f"{k}:{record[k]['anchor']}" for k in names), flush=True)
        append_record(output, record)
        records.append(record)
    print(f"anchors by estimate; stages {list(stages)}:")
    for name in [k for k in records[0] if k[-1].isdigit()]:
        print(f"  {name:9s} {[r[name]['anchor'] for r in records]}")
    return 0


TRAJECTORY_COUNTS = (6, 12, 24)


def distinct_pairs_mean(total: Sequence[np.ndarray], squares: Sequence[float], count: int) -> np.ndarray:
    """Each tensor's mean, over every ordered pair of distinct ones of `count` gradients, of their
    product, from the gradients' sum (`total`) and the sum of their squares (`squares`):
    (|sum g|^2 - sum |g|^2) / (count (count - 1))."""
    return np.array([(float(np.sum(t * t)) - q) / (count * (count - 1)) for t, q in zip(total, squares)])


def trajectory_looks(task: str, seeds: Sequence[int], output: str) -> int:
    """For each run seed, the run's first 24 training batches trained as full steps (every tensor),
    the gradients of each batch taken just before its step, and after 6, 12 and 24 steps each
    tensor's mean over every ordered pair of distinct steps of the product of their gradients
    (sum g, squared, minus the sum of each g squared, over K(K-1)), summed by stage: a look made of
    training steps, each step's gradient scored by the others' (distinct images)."""
    records = []
    for loop, updates, scored, record in looked_runs(task, seeds):
        scheme = loop.scheme
        probe, block_of, stages = scheme.probe, scheme.block_of, scheme.stages
        full = loop.steps.get(np.ones(len(block_of), np.uint8))
        batches = (batch for epoch in range(loop.config.num_epochs) for batch in loop.epochs.epoch(epoch))
        total, squares = None, None
        for count, (images, labels) in enumerate(itertools.islice(batches, max(TRAJECTORY_COUNTS)), start=1):
            with preserved_state(loop.model, probe.optimizer):  # the gradient draws no random state of the step's
                gradients = [g.numpy().astype(np.float64) for g in probe._gradients(images, labels)]
            full(images, labels)
            total = gradients if total is None else [t + g for t, g in zip(total, gradients)]
            squares = ([float(np.sum(g * g)) for g in gradients] if squares is None
                       else [q + float(np.sum(g * g)) for q, g in zip(squares, gradients)])
            if count in TRAJECTORY_COUNTS:
                sums = stage_sums(distinct_pairs_mean(total, squares, count), block_of, stages)
                record[f"steps{count}"] = {"sums": sums, "anchor": anchor_of(sums)}
        print(record["seed"], " ".join(f"{k}:{record[k]['anchor']}" for k in record if k.startswith("steps")), flush=True)
        append_record(output, record)
        records.append(record)
    print(f"anchors by steps pooled; stages {list(stages)}:")
    for count in TRAJECTORY_COUNTS:
        print(f"  steps{count:<3d} {[r[f'steps{count}']['anchor'] for r in records]}")
    return 0


def any_size(model: tf.keras.Model) -> None:
    """Let `model` and the models inside it take images of any size (convolutions and global pooling do)."""
    model.input_spec = tf.keras.layers.InputSpec(ndim=4)
    for layer in model.layers:
        if isinstance(layer, tf.keras.Model):
            any_size(layer)


def resized_looks(task: str, seeds: Sequence[int], sizes: Sequence[int], output: str) -> int:
    """For each run seed, the pooled looks of 3, 6 and 12 batches on the run's probe and validation
    images resized to each input size (bilinear), each size's gradient function traced before its
    looks are timed: a look at a lower resolution costs less an image; does it still name the stage
    the look at the run's own resolution names?"""
    records = []
    for loop, updates, scored, record in looked_runs(task, seeds):
        scheme = loop.scheme
        probe, block_of, stages = scheme.probe, scheme.block_of, scheme.stages
        record["sizes"] = {}
        any_size(scheme.context.model)
        for size in sizes:
            def resized(batches):
                return [(tf.image.resize(images, (size, size)), labels) for images, labels in batches]
            small_updates, small_scored = resized(updates), resized(scored)
            probe.pooled_loss_change(small_updates[:1], small_scored[:1])  # traces this size: untimed
            looks = {}
            for count in (3, 6, 12):
                start = time.perf_counter()
                sums = stage_sums(probe.pooled_loss_change(small_updates[:count], small_scored[:count]), block_of, stages)
                looks[f"pooled{count}"] = {"sums": sums, "anchor": anchor_of(sums),
                                           "seconds": time.perf_counter() - start}
            record["sizes"][str(size)] = looks
        print(record["seed"], " ".join(f"{size}:" + "/".join(str(looks[f'pooled{c}']['anchor']) for c in (3, 6, 12))
                             for size, looks in record["sizes"].items()), flush=True)
        append_record(output, record)
        records.append(record)
    print(f"anchors (pooled 3 / 6 / 12) by input size; stages {list(stages)}; seconds a look:")
    for size in sizes:
        looks = [r["sizes"][str(size)] for r in records]
        print(f"  {size:3d}: " + " ".join("/".join(str(l[f'pooled{c}']['anchor']) for c in (3, 6, 12)) for l in looks)
              + "  (" + ", ".join(f"{np.mean([l[f'pooled{c}']['seconds'] for l in looks]):.2f}" for c in (3, 6, 12)) + " s)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    for name, text in (("warm", "the pooled looks after the classifier alone has trained some steps"),
                       ("sizes", "the pooled looks on the same images at other input sizes"),
                       ("estimators", "other estimates from the same per-batch gradients"),
                       ("trajectory", "a look made of the run's first steps trained whole")):
        mode = modes.add_parser(name, help=text, description=text)
        mode.add_argument("--task", choices=sorted({**TASKS, **SEEN}), required=True,
                          help="a design draw (parts, shapes) or a draw whose judgement is over")
        mode.add_argument("--seeds", type=seed_range, default=range(0, 10), help="run seeds, first-last (default 0-9)")
        mode.add_argument("--output", default="", help="a JSON lines file to append each seed's record to")
        if name == "warm":
            mode.add_argument("--steps", type=numbers(0), default=[0, 15, 30, 60, 120],
                              help="classifier steps before each look, comma-separated (default 0,15,30,60,120)")
        if name == "sizes":
            mode.add_argument("--sizes", type=numbers(1), default=[32, 48, 64],
                              help="input sizes, comma-separated (default 32,48,64)")
        if name == "estimators":
            mode.add_argument("--deterministic", action="store_true",
                              help="every look's forward pass without augmentation and dropout")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.output:  # before minutes of work, not after the first seed's
        try:
            open(args.output, "a").close()
        except OSError as error:
            print(f"error: cannot write --output {args.output}: {error.strerror or error}", file=sys.stderr)
            return 2
    try:
        if args.mode == "warm":
            return warm_looks(args.task, args.seeds, sorted(args.steps), args.output)
        if args.mode == "sizes":
            return resized_looks(args.task, args.seeds, args.sizes, args.output)
        if args.mode == "estimators":
            return estimator_looks(args.task, args.seeds, args.output, args.deterministic)
        return trajectory_looks(args.task, args.seeds, args.output)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

if __name__ == "__main__":
    raise SystemExit(main())
