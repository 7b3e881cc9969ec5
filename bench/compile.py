"""What compiling a new selection's step costs, and whether a TensorFlow setting makes it cheaper.

    python -m bench.compile [--grappler '{"constant_folding": false}'] [--onednn off]

Builds the study protocol's MobileNetV2 (64 px, batch 32, frozen BatchNorm, random weights) and,
as train_step.StepCache builds them (one shared forward pass), compiles the importance probe's full
gradients, then steps for
five selections (the top 30, 60, 90, 20 and 45 tensors plus one deeper tensor each). Prints, per
selection, the trace time, the first call (graph optimisation, kernel set-up and the step) and
the typical step after it, and the mean cost a selection adds beyond its own step (the first
selection, which also builds the shared forward pass's gradient, left out). One setting per
process: grappler options are global and oneDNN is chosen when TensorFlow loads. A benchmark:
it prints, it asserts nothing; run it alone. Last, it times what a single graph for every
selection would add to each step instead (one lowered cond per tensor's gradient, per tensor's
update and per layer's input gradient) and prints the selection length below which that pays,
and how much of a compile hides behind training steps when run in a thread beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from elastic_trainer.command_line import positive_int

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--grappler", default="{}",
                        help="tf.config.optimizer.set_experimental_options as JSON, e.g. "
                             "'{\"disable_meta_optimizer\": true}'")
    parser.add_argument("--onednn", choices=("on", "off"), default="on",
                        help="TensorFlow's oneDNN kernels (TF_ENABLE_ONEDNN_OPTS)")
    parser.add_argument("--steps", type=positive_int, default=15, help="timed steps per selection after its first call")
    parser.add_argument("--overlap", type=int, default=4, metavar="ROUNDS",
                        help="rounds of the overlap measurement (a selection's compile run beside training steps "
                             "of another model, against one after the other); 0: skip it")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        options = json.loads(args.grappler)
    except json.JSONDecodeError as error:
        options = error
    if not isinstance(options, dict):
        sys.exit(f"error: --grappler is not a JSON object ({options}); e.g. '{{\"constant_folding\": false}}'")
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if args.onednn == "on" else "0"
    import numpy as np
    import tensorflow as tf

    import models
    from elastic_trainer.step_timing import typical_ms
    from train_step import TrainStep, full_gradients, make_optimizer, shared_forward, variables_by_mask

    if options:
        tf.config.optimizer.set_experimental_options(options)
    tf.keras.utils.set_random_seed(0)
    model = models.build_model("mobilenetv2", 64, 64, weights=None, bn_mode="frozen")
    setup = make_optimizer("sgd", 0.01, 1e-4, 1000)
    setup.optimizer._create_all_weights(model.trainable_weights)
    forward = shared_forward(model)
    rng = np.random.default_rng(0)
    images = tf.constant(rng.uniform(0, 255, (32, 64, 64, 3)), tf.float32)
    labels = tf.constant(rng.integers(0, 64, 32), tf.int64)

    def timed(function) -> float:
        start = time.perf_counter()
        function()
        return time.perf_counter() - start

    gradients = full_gradients(model, forward)
    probe_first = timed(lambda: gradients(images, labels)[0].numpy())
    probe_ms = 1000 * typical_ms([timed(lambda: gradients(images, labels)[0].numpy()) for _ in range(args.steps)])
    print(f"grappler {options or 'default'}, oneDNN {args.onednn}")
    print(f"probe's full gradients: first call {probe_first:.2f} s, then {probe_ms:.1f} ms")
    print(f"{'selection':<12}{'trace s':>9}{'first call s':>14}{'step ms':>9}")
    count, extra = len(model.trainable_weights), []
    for index, top in enumerate((30, 60, 90, 20, 45)):
        mask = np.zeros(count, np.uint8)
        mask[-top:] = 1
        mask[rng.integers(0, count - top)] = 1  # one deeper tensor
        step = TrainStep(model, setup.optimizer, variables_by_mask(model, mask), None, forward)
        trace = timed(lambda: step.function.get_concrete_function(images, labels))
        first = timed(lambda: step(images, labels)[0].numpy())
        step_ms = 1000 * typical_ms([timed(lambda: step(images, labels)[0].numpy()) for _ in range(args.steps)])
        print(f"top {top:<8}{trace:>9.2f}{first:>14.2f}{step_ms:>9.1f}")
        if index:
            extra.append(trace + first - step_ms / 1000)
    per_selection = float(np.mean(extra))
    print(f"a new selection costs {per_selection:.2f} s beyond its own step (mean of the last {len(extra)})")
    layers = [layer for layer in model._flatten_layers(include_self=False) if not isinstance(layer, tf.keras.Model)]
    conds = 2 * count + len(layers)
    extra_ms = cond_cost_ms(tf, conds)
    print(f"one graph for every selection (no compile per selection) would gate each tensor's gradient and "
          f"update and each layer's input gradient behind a cond: at least {conds} lowered conds, {extra_ms:.2f} ms "
          f"more per step here; it pays only for selections shorter than {1000 * per_selection / extra_ms:.0f} steps")
    if args.overlap > 0:
        overlap(tf, model, setup.optimizer, forward, images, labels, args.overlap)
    return 0


def overlap(tf, trained, optimizer, forward, images, labels, rounds: int) -> None:
    """How much of a new selection's compile hides behind training steps on this machine: 30
    steps of `trained` (a selection already compiled), and a new selection's step of a second
    model compiled and called once in a thread beside them, against the two one after the other
    (alternate rounds). A second model, so that the compile's first call changes nothing the
    training reads; training itself cannot do that yet (see docs/benchmarks/compile.md)."""
    import threading

    import numpy as np

    import models
    from train_step import TrainStep, full_gradients, make_optimizer, shared_forward, variables_by_mask

    other = models.build_model("mobilenetv2", 64, 64, weights=None, bn_mode="frozen")
    other_setup = make_optimizer("sgd", 0.01, 1e-4, 1000)
    other_setup.optimizer._create_all_weights(other.trainable_weights)
    other_forward = shared_forward(other)
    full_gradients(other, other_forward)(images, labels)[0].numpy()  # as training has by its second selection
    count, rng = len(trained.trainable_weights), np.random.default_rng(1)
    mask = np.zeros(count, np.uint8)
    mask[-60:] = 1
    step = TrainStep(trained, optimizer, variables_by_mask(trained, mask), None, forward)
    step(images, labels)[0].numpy()

    def train():
        for _ in range(30):
            float(step(images, labels)[0])

    def compile_new():
        top = int(rng.integers(20, 90))
        selection = np.zeros(count, np.uint8)
        selection[-top:] = 1
        new = TrainStep(other, other_setup.optimizer, variables_by_mask(other, selection), None, other_forward)
        new(images, labels)[0].numpy()

    alone, beside = [], []
    for index in range(2 * rounds):
        start = time.perf_counter()
        if index % 2:
            thread = threading.Thread(target=compile_new)
            thread.start()
            train()
            thread.join()
            beside.append(time.perf_counter() - start)
        else:
            train()
            trained_at = time.perf_counter()
            compile_new()
            alone.append((time.perf_counter() - start, time.perf_counter() - trained_at))
    total, compile_s = np.mean([a for a, _ in alone]), np.mean([c for _, c in alone])
    print(f"30 steps and a new selection's compile: {total:.2f} s one after the other (the compile {compile_s:.2f} s), "
          f"{np.mean(beside):.2f} s side by side: {100 * (total - np.mean(beside)) / compile_s:.0f} % of the compile "
          f"hidden behind training (means of {rounds} rounds each)")


def cond_cost_ms(tf, count: int, calls: int = 200) -> float:
    """Extra wall time (ms) of `count` lowered tf.conds in one call of a tf.function, against the
    same ops without them (the conds' Switch and Merge ops dispatched by the executor)."""
    import numpy as np

    def build(gated: bool):
        def run(x, flags):
            outputs = [tf.cond(flags[i], lambda: x * 2.0, lambda: x) if gated else x * 2.0 for i in range(count)]
            return tf.add_n(outputs)
        return tf.function(run)

    x, flags = tf.ones([8]), tf.constant(np.arange(count) % 2 == 0)
    typical = []
    for function in (build(True), build(False)):
        function(x, flags).numpy()
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            function(x, flags).numpy()
            samples.append(time.perf_counter() - start)
        typical.append(1000 * float(np.percentile(samples, 25)))
    return typical[0] - typical[1]


if __name__ == "__main__":
    sys.exit(main())
