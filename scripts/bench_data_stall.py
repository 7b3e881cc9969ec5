"""Epochs stretched by tf.data's autotuning: epoch wall time against the time its steps took.

    python scripts/bench_data_stall.py                 # MobileNetV2 64 px, batch 32, 6 epochs

Trains full-training steps over the embedded target task's epochs (data.load_epochs, as
main.py does), alternating epochs between the project's pipeline (autotuning off) and the same
pipeline with tf.data's autotuning switched back on (an autotuned map and prefetch at its end,
as main.py had before). For each epoch it prints the wall time,
the sum of its steps and of its waits for data, and what is left: the time spent deleting the
finished epoch's iterator. With autotuning on, that deletion waits for the autotuning thread's
current sleep (its periods double up to 60 s), which stretched epochs to 20.5, 41 or 82 s.
A benchmark: it prints, it asserts nothing. Epoch 0 (compiling, filling the cache) is left out
of the totals.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from utils import prepare_tensorflow_environment, run_cli  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="mobilenetv2", help="the registry model")
    parser.add_argument("--input_size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--batch_size", type=int, default=32, help="images per step")
    parser.add_argument("--epochs", type=int, default=7, help="epochs (the first warms up, then modes alternate)")
    args = parser.parse_args(argv)
    prepare_tensorflow_environment()
    import numpy as np
    import tensorflow as tf

    import data
    import models
    import train_step
    from train_step import make_optimizer

    model = models.build_model(args.model_name, 64, args.input_size, "none", "frozen")
    epochs = data.load_epochs("embedded_shapes", args.batch_size, args.input_size, seed=0)
    step = train_step.StepCache(model, make_optimizer("sgd", 1e-3, 5e-4, 1000).optimizer).get(
        np.ones(len(model.trainable_weights), np.uint8))
    autotuned = tf.data.Options()
    autotuned.autotune.enabled = True
    print(f"{args.model_name} {args.input_size} px, batch {args.batch_size}, full training steps")
    print(f"{'epoch':>5} {'autotuning':>10} {'wall s':>7} {'steps s':>8} {'data s':>7} {'left s':>7}")
    totals = {"off": [0.0, 0.0], "on": [0.0, 0.0]}  # wall, left
    for index in range(args.epochs):
        mode = "on" if index % 2 == 0 else "off"
        dataset = epochs.epoch(index)
        if mode == "on":  # as before the fix: autotuned parallelism and prefetching at the end
            dataset = dataset.map(lambda x, y: (x, y), num_parallel_calls=tf.data.AUTOTUNE)
            dataset = dataset.prefetch(tf.data.AUTOTUNE).with_options(autotuned)
        start = previous = time.perf_counter()
        stepping = waiting = 0.0
        for images, labels in dataset:  # the iterator is deleted when the loop ends, as in train.py
            fetched = time.perf_counter()
            float(step(images, labels)[0])
            done = time.perf_counter()
            waiting, stepping, previous = waiting + fetched - previous, stepping + done - fetched, done
        wall = time.perf_counter() - start
        left = wall - stepping - waiting
        if index:
            totals[mode][0] += wall
            totals[mode][1] += left
        print(f"{index:>5} {mode:>10} {wall:>7.1f} {stepping:>8.1f} {waiting:>7.1f} {left:>7.1f}"
              + ("  (warm-up)" if index == 0 else ""), flush=True)
    for mode, (wall, left) in totals.items():
        print(f"autotuning {mode}: {wall:.1f} s of epochs, {left:.1f} s ({100 * left / max(wall, 1e-9):.0f} %) "
              f"outside steps and data")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
