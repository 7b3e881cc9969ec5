"""ElasticTrainer's speedup at the paper's run length, projected from costs measured on this machine.

The study's protocol is 360 steps, and its fixed costs (start-up, tracing, compiles, the final
test) are a fifth of ElasticTrainer's training; the paper's ResNet50 / CUB-200 run is 1,499 steps an
epoch at batch 4 for 12 epochs. This measures, in one process and on random weights (the paper's
ImageNet weights need a network; step times do not depend on the weights' values):

- building the model, and one inference batch (the evaluation's unit);
- full training's first step (trace and compile) and its typical step;
- ElasticTrainer's "50 %" selection as a run makes it (--rho 0.533 --rho_mode paper, one probe
  batch, the probe eager or traced as `--probe_mode auto` picks for the run's 6 calls), twice: the
  first selection of a process and a later one, each in its parts; then that selection's first step
  and its typical step, interleaved with full steps.

It then projects both runs (training; and the whole process: start-up, training and the final test)
from those costs: full training pays one compile and every step at the full step's time;
ElasticTrainer pays its selections, one compile each, and every step at its selection's time.
The projection keeps the measured selection for all three (a pretrained backbone selects others).

    python -m bench.projection                                   # ResNet50 224 px, batch 4
    python -m bench.projection --output results/bench_projection.md

Needs the model's profile at that size and batch (made here by profiler.py when missing: about
5 minutes for ResNet50 224 px on 2 cores). Run it alone: the ratios are only as good as the machine
is quiet. It prints; it asserts nothing.
"""
from __future__ import annotations

from elastic_trainer import tf_environment  # noqa: F401  (first: TensorFlow's environment before TensorFlow loads)
import argparse
import os
import subprocess
import sys
import time
from typing import Dict

from bench import publish_report
from elastic_trainer.command_line import positive_int, run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The paper's CUB-200 run (docs/paper.md, "Protocol"; the split sizes are TFDS caltech_birds2011's):
# 5,994 training and 5,794 test images, batch 4, 12 epochs, a selection every 4 epochs.
PAPER_RUN = {"train_images": 5994, "test_images": 5794, "epochs": 12, "interval": 4}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="resnet50", help="the backbone (with the paper's head)")
    parser.add_argument("--input_size", type=positive_int, default=224, help="image side in pixels")
    parser.add_argument("--batch_size", type=positive_int, default=4, help="batch size")
    parser.add_argument("--num_classes", type=positive_int, default=200, help="classes (CUB-200: 200)")
    parser.add_argument("--rounds", type=positive_int, default=10, help="timed steps of each kind")
    parser.add_argument("--output", help="also write the report (markdown) to this file")
    return parser.parse_args(argv)


def project(measured: Dict[str, float], steps: int, selections: int, test_batches: int) -> Dict[str, float]:
    """Seconds of full training and ElasticTrainer at `steps` steps with `selections` selections,
    training and whole process (start-up + training + final test), from `measured` costs (seconds):
    startup, full_first / full_step, selection_first / selection_later (each whole), et_first /
    et_step (the selection's step), inference (one batch)."""
    m = measured
    full_train = m["full_first"] + (steps - 1) * m["full_step"]
    compile_et = m["et_first"] - m["et_step"]  # each new selection's step compiles once
    et_train = (m["selection_first"] + (selections - 1) * m["selection_later"] + selections * compile_et
                + steps * m["et_step"])
    rest = m["startup"] + test_batches * m["inference"]
    return {"full_train": full_train, "et_train": et_train, "full_process": full_train + rest,
            "et_process": et_train + rest, "training_speedup": full_train / et_train,
            "process_speedup": (full_train + rest) / (et_train + rest)}


def measure(args: argparse.Namespace) -> Dict[str, float]:
    """The costs `project` needs, measured in this process (seconds), and what was chosen."""
    start = time.perf_counter()
    import numpy as np
    import tensorflow as tf

    import models
    import profiler
    import schemes
    import train_step
    from elastic_trainer import profile_tables
    from elastic_trainer.step_timing import typical_ms, wall_time_samples
    from train_step import make_optimizer
    imported = time.perf_counter() - start

    name = profile_tables.profile_name(args.model_name, args.input_size, args.num_classes, args.batch_size, "frozen")
    profile = profile_tables.load_profile(os.path.join(ROOT, "profile_extracted", name + ".json"))

    start = time.perf_counter()
    model = models.build_model(args.model_name, args.num_classes, args.input_size, weights=None)
    built = time.perf_counter() - start
    images, labels = profiler.random_batch(model, args.batch_size)
    setup = make_optimizer("sgd", 1e-3, 5e-4, 10_000)
    cache = train_step.StepCache(model, setup.optimizer)
    probe = schemes.ImportanceProbe(model, setup.optimizer, cache.forward)
    choice = probe.plan(2 * 3, "auto", profile)  # a run's three selections of two gradient calls
    controller = schemes.StepTimeController(profile, 0.533, rho_mode="paper")

    selections = []
    with train_step.preserved_state(model, setup.optimizer):
        for _ in range(2):  # a process's first selection, and a later one
            parts: Dict[str, float] = {}
            begun = time.perf_counter()
            importance = schemes.normalized(probe.accounted(parts, lambda: probe.loss_change([(images, labels)])))
            mask = controller.select(importance)
            selections.append((time.perf_counter() - begun, parts))

    def first_call(step) -> float:
        begun = time.perf_counter()
        step(images, labels)[0].numpy()
        return time.perf_counter() - begun

    inference = tf.function(lambda batch: (model(batch, training=False),), autograph=False)  # the evaluation's pass
    with train_step.preserved_state(model, setup.optimizer):
        full, selected = cache.get(np.ones_like(mask)), cache.get(mask)
        full_first, et_first = first_call(full), first_call(selected)
        inference(images)[0].numpy()  # traced and warm
        full_ms, et_ms, inference_ms = (typical_ms(samples) for samples in wall_time_samples(
            [lambda s=s: s(images, labels)[0].numpy() for s in (full, selected)]
            + [lambda: inference(images)[0].numpy()], args.rounds, block=2))
    return {"startup": imported + built, "imports": imported, "model": built,
            "full_first": full_first, "full_step": full_ms / 1000, "et_first": et_first, "et_step": et_ms / 1000,
            "selection_first": selections[0][0], "selection_later": selections[1][0],
            "first_parts": selections[0][1], "later_parts": selections[1][1], "inference": inference_ms / 1000,
            "selected": int(mask.sum()), "tensors": len(mask), "probe_mode": choice["mode"], "why": choice["why"]}


def report(measured: Dict, args: argparse.Namespace) -> str:
    batches = -(-PAPER_RUN["train_images"] // args.batch_size)  # the last, smaller batch is a step too
    steps = batches * PAPER_RUN["epochs"]
    selections = -(-PAPER_RUN["epochs"] // PAPER_RUN["interval"])
    test_batches = -(-PAPER_RUN["test_images"] // args.batch_size)
    m = measured
    parts = lambda which: ", ".join(f"{k} {v:.2f}" for k, v in m[which].items() if v)  # noqa: E731
    lines = [f"{args.model_name} {args.input_size} px, batch {args.batch_size}, {args.num_classes} classes, random "
             f"weights; ElasticTrainer \"50 %\" (--rho 0.533 --rho_mode paper) trains {m['selected']} of "
             f"{m['tensors']} tensors; probe {m['probe_mode']} ({m['why']})", "",
             "| measured | seconds |", "|---|---:|",
             f"| start-up: imports, model | {m['imports']:.2f} + {m['model']:.2f} |",
             f"| full step: first (compiles), typical | {m['full_first']:.2f}, {m['full_step']:.3f} |",
             f"| ElasticTrainer's step: first (compiles), typical | {m['et_first']:.2f}, {m['et_step']:.3f} "
             f"({m['et_step'] / m['full_step']:.3f} of a full step) |",
             f"| a process's first selection ({parts('first_parts')}) | {m['selection_first']:.2f} |",
             f"| a later selection ({parts('later_parts')}) | {m['selection_later']:.2f} |",
             f"| one inference batch | {m['inference']:.3f} |", "",
             "| run | steps | selections | full training s | ElasticTrainer s | training speedup | "
             "whole-process speedup |", "|---|---:|---:|---:|---:|---:|---:|"]
    for label, count in (("the study's length (360 steps, 3 selections)", 360),
                         (f"the paper's CUB-200 run ({batches} steps an epoch, {PAPER_RUN['epochs']} epochs)", steps)):
        p = project(m, count, selections, test_batches)
        lines.append(f"| {label} | {count} | {selections} | {p['full_train']:.0f} | {p['et_train']:.0f} | "
                     f"{p['training_speedup']:.2f}x | {p['process_speedup']:.2f}x |")
    lines += ["", f"Whole process: start-up, training and one test of {PAPER_RUN['test_images']} images "
                  f"({test_batches} inference batches); the data's preparation is left out (CUB needs a download)."]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    # the profile (made, or completed, in a process of its own: this one measures first calls cold)
    subprocess.run([sys.executable, os.path.join(ROOT, "profiler.py"), "--model_name", args.model_name,
                    "--input_size", str(args.input_size), "--num_classes", str(args.num_classes),
                    "--batch_size", str(args.batch_size), "--weights", "none"], check=True, cwd=ROOT)
    publish_report(report(measure(args), args), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
