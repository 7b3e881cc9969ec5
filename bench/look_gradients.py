"""Could one batch of the held-out look cost less than a full gradient call? The look's batches each
take the gradients of every tensor (train_step.full_gradients). Two cheaper ways, timed against it
in one process, in alternating order block by block: the gradients of the BatchNorm gammas and
betas alone (the weight gradients of the convolutions are then never computed, but the error
gradient still crosses the whole network), and the full gradients called eagerly (no trace to
pay, each call slower). No training; random weights (the weights do not change the time).

    python -m bench.look_gradients [--input_size 64] [--batch_size 32] [--blocks 8] [--calls 6]

Prints each variant's first call (the trace, for the graph ones) and the median of its blocks'
per-call times, in milliseconds, and each median over the full gradients'.
"""
from __future__ import annotations

import argparse
import time
from typing import Callable, Dict, List

import numpy as np

from elastic_trainer.command_line import positive_int


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="mobilenetv2", help="the backbone (with the paper's head)")
    parser.add_argument("--input_size", type=positive_int, default=64, help="image side in pixels")
    parser.add_argument("--batch_size", type=positive_int, default=32, help="batch size")
    parser.add_argument("--num_classes", type=positive_int, default=64, help="classes of the head")
    parser.add_argument("--blocks", type=positive_int, default=8, help="timed blocks of each variant")
    parser.add_argument("--calls", type=positive_int, default=6, help="calls in a block")
    return parser.parse_args(argv)


def report(first_ms: Dict[str, float], blocks_ms: Dict[str, List[float]]) -> str:
    """A markdown table: each variant's first call, its median per-call time over blocks, and that
    median over the first variant's."""
    names = list(blocks_ms)
    base = float(np.median(blocks_ms[names[0]]))
    lines = ["| gradients | first call ms | per call ms (median of blocks) | over the full gradients |",
             "|---|---:|---:|---:|"]
    for name in names:
        median = float(np.median(blocks_ms[name]))
        lines.append(f"| {name} | {first_ms[name]:.0f} | {median:.1f} | {median / base:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    import tensorflow as tf

    import models
    from train_step import classification_loss, full_gradients, shared_forward

    tf.random.set_seed(0)
    model = models.build_model(args.model_name, args.num_classes, args.input_size, weights=None)
    forward = shared_forward(model)
    norms = [w for w in model.trainable_weights if "gamma" in w.name or "beta" in w.name]

    def norm_gradients(images, labels):
        with tf.GradientTape() as tape:
            loss = classification_loss(labels, forward(images))
        return tape.gradient(loss, norms)

    def eager_gradients(images, labels):
        with tf.GradientTape() as tape:
            loss = classification_loss(labels, model(images, training=True))
        return tape.gradient(loss, model.trainable_weights)

    variants: Dict[str, Callable] = {
        "every tensor (the look's)": full_gradients(model, forward),
        "BatchNorm gammas and betas alone": tf.function(norm_gradients, autograph=False),
        "every tensor, eager": eager_gradients}
    images = tf.random.uniform([args.batch_size, args.input_size, args.input_size, 3], 0, 255)
    labels = tf.random.uniform([args.batch_size], 0, args.num_classes, tf.int32)
    first_ms, blocks_ms = {}, {name: [] for name in variants}
    for name, function in variants.items():
        start = time.perf_counter()
        function(images, labels)[0].numpy()
        first_ms[name] = (time.perf_counter() - start) * 1000
    order = list(variants)
    for block in range(args.blocks):
        for name in order if block % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            for _ in range(args.calls):
                variants[name](images, labels)[0].numpy()
            blocks_ms[name].append((time.perf_counter() - start) * 1000 / args.calls)
    print(report(first_ms, blocks_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
