"""One train step for every selection, the mask a tensor: does it pay against a compile per selection?

    python -m bench.gated_step [--steps 30]

A prototype, measured and not used by training. Every layer of the study protocol's MobileNetV2
(64 px, batch 32, frozen BatchNorm, the cached source backbone when present) runs under a
tf.custom_gradient whose backward puts each weight gradient, and the gradient of the layer's
inputs, behind a tf.cond on a 0/1 mask passed in as a tensor (a layer's input gradient is
needed when any tensor before it is selected); each variable's update sits behind its own cond.
So one traced function serves every selection and nothing compiles when the selection changes.
Both kinds of step use plain SGD updates so only the gradients differ. Prints the gated step's
one-off compile, each specialised step's compile, and the typical step time of both for four
selections (block-interleaved), after checking that one gated step updates exactly the
selected tensors, as the specialised step does. A benchmark: it prints, it asserts nothing;
run it alone.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from experiments import study_plans
from utils import positive_int

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LEARNING_RATE = 1e-3


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--steps", type=positive_int, default=30, help="timed steps of each kind per selection")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    import numpy as np
    import tensorflow as tf

    import models
    from train_step import classification_loss
    from measure import typical_ms, wall_time_samples

    model, protocol = study_plans.protocol_model("mobilenetv2")
    weights = model.trainable_weights
    position = {v.ref(): i for i, v in enumerate(weights)}
    layers = [layer for layer in models.backbone_of(model).layers
              if not isinstance(layer, tf.keras.layers.InputLayer)]
    layers += [model.get_layer(name) for name in ("global_pool", "dropout", models.CLASSIFIER_NAME)]
    tensors_before, seen = [], 0
    for layer in layers:
        tensors_before.append(seen)
        seen += len(layer.trainable_weights)
    assert seen == len(weights), "every trainable tensor belongs to one gated layer"

    def gated_call(layer, original, weight_flags, input_flag):
        def call(inputs, *call_args, **call_kwargs):
            several = isinstance(inputs, (list, tuple))

            @tf.custom_gradient
            def run(*xs):
                with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
                    tape.watch(list(xs))
                    tape.watch(layer.trainable_weights)
                    y = original(list(xs) if several else xs[0], *call_args, **call_kwargs)

                def gradient(dy, variables=None):
                    dxs = [tf.cond(input_flag, lambda x=x: tape.gradient(y, x, output_gradients=dy),
                                   lambda x=x: tf.zeros_like(x)) for x in xs]
                    flags = {v.ref(): f for v, f in zip(layer.trainable_weights, weight_flags)}
                    dws = [tf.cond(flags[v.ref()], lambda v=v: tape.gradient(y, v, output_gradients=dy),
                                   lambda v=v: tf.zeros_like(v)) for v in (variables or [])]
                    return dxs, dws
                return y, gradient
            return run(*(inputs if several else [inputs]))
        return call

    @tf.function
    def gated_step(images, labels, mask):
        any_before = tf.math.cumsum(tf.cast(mask, tf.int32)) > 0
        originals = [(layer, layer.call) for layer in layers]
        try:
            for (layer, original), count in zip(originals, tensors_before):
                layer.call = gated_call(layer, original, [mask[position[v.ref()]] for v in layer.trainable_weights],
                                        any_before[count - 1] if count else tf.constant(False))
            with tf.GradientTape() as tape:
                loss = classification_loss(labels, model(images, training=True))
            gradients = tape.gradient(loss, weights)
        finally:
            for layer, original in originals:
                layer.call = original
        for index, (g, v) in enumerate(zip(gradients, weights)):
            tf.cond(mask[index], lambda g=g, v=v: v.assign_sub(LEARNING_RATE * g).op, tf.no_op)
        return loss

    def specialised(mask):
        chosen = [w for w, keep in zip(weights, mask) if keep]

        @tf.function
        def step(images, labels):
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(chosen)
                loss = classification_loss(labels, model(images, training=True))
            for g, v in zip(tape.gradient(loss, chosen), chosen):
                v.assign_sub(LEARNING_RATE * g)
            return loss
        return step

    rng = np.random.default_rng(0)
    size, batch = protocol["input_size"], protocol["batch_size"]
    images = tf.constant(rng.uniform(0, 255, (batch, size, size, 3)), tf.float32)
    labels = tf.constant(rng.integers(0, protocol["num_classes"], batch), tf.int64)
    count = len(weights)
    masks = {}
    for top in (20, 45, 90):
        mask = np.zeros(count, bool)
        mask[-top:] = True
        mask[rng.integers(0, count - top)] = True  # one deeper tensor
        masks[f"top {top} + 1"] = mask
    masks["all"] = np.ones(count, bool)
    state = list(model.variables) + models.random_states(model)  # dropout's generator too
    snapshot = [v.numpy() for v in state]
    original = [v.numpy() for v in weights]

    def restore():
        for variable, value in zip(state, snapshot):
            variable.assign(value)

    def timed(function) -> float:
        start = time.perf_counter()
        function()
        return time.perf_counter() - start

    check = masks["top 45 + 1"]
    first_gated = timed(lambda: gated_step(images, labels, tf.constant(check)).numpy())
    gated_weights = [v.numpy() for v in weights]
    restore()
    steps = {}
    first_specialised = {}
    for name, mask in masks.items():
        steps[name] = specialised(mask)
        first_specialised[name] = timed(lambda: steps[name](images, labels).numpy())
        if name == "top 45 + 1":
            specialised_weights = [v.numpy() for v in weights]
        restore()
    untouched = all(np.array_equal(g, o) for g, o, keep in zip(gated_weights, original, check) if not keep)
    difference = max(float(np.max(np.abs(g - s))) for g, s in zip(gated_weights, specialised_weights))
    print(f"one gated step (top 45 + 1): unselected tensors unchanged: {untouched}; largest difference from the "
          f"specialised step's update: {difference:.1e}")
    print(f"gated step: trace and first call {first_gated:.2f} s, once for every selection")
    print(f"{'selection':<12}{'tensors':>8}{'compile s':>11}{'specialised ms':>16}{'gated ms':>10}{'ratio':>7}")
    for name, mask in masks.items():
        flags = tf.constant(mask)
        samples = wall_time_samples([lambda: steps[name](images, labels).numpy(),
                                     lambda: gated_step(images, labels, flags).numpy()], args.steps)
        restore()
        special, gated = (typical_ms(s) for s in samples)
        print(f"{name:<12}{int(mask.sum()):>8}{first_specialised[name]:>11.2f}{special:>16.1f}{gated:>10.1f}"
              f"{gated / special:>7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
