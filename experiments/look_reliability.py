"""How reliable is the anchored candidates' one look? No training: for each run seed it builds the
run as main.py does (the fourteenth candidate's, rho 0.7 exact: model, classifier initialisation,
probe stream, validation shuffle), takes the first 24 probe batches and the first 24 validation
batches the run's look would take, and names the anchor (the stage with the largest positive sum)
under two looks at several sizes:
- paired N: the mean over the first N pairs of one update on a probe batch, scored on the
  validation batch beside it (the look of the fifth to fourteenth candidates makes N = 3: one
  --probe_batches a selection, three selections);
- pooled N: one update on the mean gradient of the first N probe batches, scored by the mean
  gradient of the first N validation batches after it (ImportanceProbe.pooled_loss_change).
Prints one line a seed; with --output appends each seed's record (stage sums of every variant and
of each pair, seconds) to a JSON lines file.

    python -m experiments.look_reliability --task parts --seeds 0-9 --output look_parts.jsonl

On the design draws the stage-alone runs gain most in blocks 7-13 (stage 3) on embedded_parts and
in blocks 0-3 (stages 0-1) on embedded_shapes (results/study/*/frontier.md).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np
import tensorflow as tf

import main as cli
from experiments.study_plans import plan_protocol, validation_flags
from run_outputs import provenance
from schemes.anchored import anchor_of, stage_sums

VARIANTS = ("paired3", "paired6", "paired12", "paired24", "pooled3", "pooled6", "pooled12")
TASKS = {"parts": "parts_mobilenetv2", "shapes": "mobilenetv2"}  # the design draws (task seed 0)
# draws whose judgement is over (2026-11-27): their looks describe why a judged candidate chose as it did
SEEN = {"parts_seed3": "parts_seed3_mobilenetv2", "parts_seed4": "parts_seed4_mobilenetv2",
        "shapes_seed2": "shapes_seed2_mobilenetv2"}


def run_flags(task: str, seed: int, logdir: str) -> list:
    protocol = plan_protocol({**TASKS, **SEEN}[task], "frontier")
    return ["--model_name", protocol["model_name"], "--dataset_name", protocol["dataset_name"],
            "--num_classes", str(protocol["num_classes"]), "--input_size", str(protocol["input_size"]),
            "--batch_size", str(protocol["batch_size"]), "--num_epochs", str(protocol["num_epochs"]),
            "--interval", str(protocol["interval"]), "--bn_mode", protocol["bn_mode"],
            "--weights", protocol["weights"], "--learning_rate", str(protocol["learning_rate"]),
            *validation_flags(protocol), "--train_type", "frugal_anchored_training", "--rho", "0.7",
            "--rho_mode", "exact", "--seed", str(seed), "--logdir", logdir]


def build(task: str, seed: int, logdir: str):
    import data
    import models
    from run_outputs import RunOutputs
    from train import Loop, load_profile_for
    config = cli.resolve_config(cli.parse_args(run_flags(task, seed, logdir)))
    tf.keras.utils.set_random_seed(config.seed)
    model = models.build_model(config.model_name, config.num_classes, config.input_size, config.weights,
                               config.bn_mode, config.gradient_filter, False)
    profile = load_profile_for(config, model)
    train_data = data.load_epochs(config.dataset_name, config.batch_size, config.input_size, config.data_dir,
                                  seed=config.seed, val_fraction=config.val_fraction)
    val_data = data.load(config.dataset_name, data.VALIDATION, config.batch_size, config.input_size,
                         config.data_dir, val_fraction=config.val_fraction)
    steps = data.steps_per_epoch(config.dataset_name, config.batch_size, config.data_dir, config.val_fraction)
    outputs = RunOutputs(config.logdir, config.run_name, config.model_name, config.num_classes, config.input_size)
    return Loop(config, model, train_data, steps, outputs, profile, "", None, val_data)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted({**TASKS, **SEEN}), required=True)
    parser.add_argument("--seeds", default="0-9", help="run seeds, first-last")
    parser.add_argument("--output", default="", help="a JSON lines file to append each seed's record to")
    args = parser.parse_args(argv)
    first, last = (int(x) for x in args.seeds.split("-"))
    records = []
    for seed in range(first, last + 1):
        with tempfile.TemporaryDirectory() as logdir:
            loop = build(args.task, seed, logdir)
            scheme = loop.scheme
            probe, block_of, stages = scheme.probe, scheme.block_of, scheme.stages
            record = {"task": args.task, "seed": seed, "provenance": provenance(run_flags(args.task, seed, "-"),
                                                                                 loop.config.weights)}
            updates, scored = scheme.probe_batches(24), scheme.scored_batches(24)
            probe.loss_change(updates[:1], scored=scored[:1])  # traces the gradients and makes the slots: untimed
            start = time.perf_counter()
            paired = [probe.loss_change([u], scored=[s]) for u, s in zip(updates, scored)]
            record["paired_seconds_each"] = (time.perf_counter() - start) / len(paired)
            record["pair_sums"] = [stage_sums(p, block_of, stages) for p in paired]
            for count in (3, 6, 12, 24):
                sums = stage_sums(np.mean(paired[:count], axis=0), block_of, stages)
                record[f"paired{count}"] = {"sums": sums, "anchor": anchor_of(sums)}
            for count in (3, 6, 12):
                start = time.perf_counter()
                sums = stage_sums(probe.pooled_loss_change(updates[:count], scored[:count]), block_of, stages)
                record[f"pooled{count}"] = {"sums": sums, "anchor": anchor_of(sums),
                                            "seconds": time.perf_counter() - start}
            print(seed, " ".join(f"{name}:{record[name]['anchor']}" for name in VARIANTS), flush=True)
            if args.output:  # one line a seed, appended whole
                with open(args.output, "a") as handle:
                    handle.write(json.dumps(record) + "\n")
            records.append(record)
    print(f"anchors over run seeds {first}-{last} (stage index; stages {list(stages)}):")
    for name in VARIANTS:
        print(f"  {name:9s} {[r[name]['anchor'] for r in records]}")
    for count in (3, 6, 12):
        seconds = np.mean([r[f"pooled{count}"]["seconds"] for r in records])
        print(f"  pooled{count} look: {seconds:.2f} s; paired{count}: {count * np.mean([r['paired_seconds_each'] for r in records]):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
