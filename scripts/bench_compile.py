"""What compiling a new selection's step costs, and whether a TensorFlow setting makes it cheaper.

    python scripts/bench_compile.py [--grappler '{"constant_folding": false}'] [--onednn off]

Builds the study protocol's MobileNetV2 (64 px, batch 32, frozen BatchNorm, random weights) and,
as train.StepCache builds them (one shared forward pass), compiles the importance probe's full
gradients, then steps for
five selections (the top 30, 60, 90, 20 and 45 tensors plus one deeper tensor each). Prints, per
selection, the trace time, the first call (graph optimisation, kernel set-up and the step) and
the typical step after it, and the mean cost a selection adds beyond its own step (the first
selection, which also builds the shared forward pass's gradient, left out). One setting per
process: grappler options are global and oneDNN is chosen when TensorFlow loads. A benchmark:
it prints, it asserts nothing; run it alone.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from utils import positive_int  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--grappler", default="{}",
                        help="tf.config.optimizer.set_experimental_options as JSON, e.g. "
                             "'{\"disable_meta_optimizer\": true}'")
    parser.add_argument("--onednn", choices=("on", "off"), default="on",
                        help="TensorFlow's oneDNN kernels (TF_ENABLE_ONEDNN_OPTS)")
    parser.add_argument("--steps", type=positive_int, default=15, help="timed steps per selection after its first call")
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
    from train_step import TrainStep, full_gradients, make_optimizer, shared_forward, typical_ms, variables_by_mask

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
    print(f"a new selection costs {np.mean(extra):.2f} s beyond its own step (mean of the last {len(extra)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
