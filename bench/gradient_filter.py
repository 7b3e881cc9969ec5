"""How much gradient filtering cuts the backward pass of the blocks it filters.

    python -m bench.gradient_filter --model_name mobilenetv2 --input_size 64 --batch_size 32

For each radius r and block count N, two copies of the model with the same weights, one with
the output gradients of its last N blocks' convolutions filtered over r x r patches, train the
same tensors (those blocks and the classifier, as gradient_filter_training does). Their steps,
a forward pass alone and a full training step are timed in one process, in alternating blocks
of consecutive steps, and compared by their 25th percentiles (on a shared machine other work
only adds time). The backward time of a step is its time minus the forward pass's. A benchmark:
it prints, it asserts nothing.
"""
from __future__ import annotations

from elastic_trainer import tf_environment  # noqa: F401  (first: TensorFlow's environment before TensorFlow loads)
import argparse
import sys

from elastic_trainer.command_line import UserError, positive_int, run_cli


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name", default="mobilenetv2", help="a registry CNN")
    parser.add_argument("--input_size", type=int, default=64)
    parser.add_argument("--batch_size", type=positive_int, default=32)
    parser.add_argument("--num_classes", type=positive_int, default=64)
    parser.add_argument("--bn_mode", default="frozen", choices=["frozen", "train"])
    parser.add_argument("--radii", type=int, nargs="+", default=[2, 4], help="patch sizes r")
    parser.add_argument("--blocks", type=positive_int, nargs="+", default=[2, 4, 8], help="block counts N")
    parser.add_argument("--rounds", type=positive_int, default=30, help="timed steps of each kind")
    parser.add_argument("--depthwise", action="store_true",
                        help="filter depthwise convolutions too (off in training: see gradient_filter.py)")
    parser.add_argument("--single_convs", action="store_true",
                        help="instead: the backward pass (input and weight gradients) of single convolutions "
                             "of typical shapes, plain against filtered at r 2 and 4")
    args = parser.parse_args(argv)
    import tensorflow as tf

    if args.single_convs:
        return single_convolutions(args.rounds)

    import models
    import profiler
    from elastic_trainer.step_timing import typical_ms, wall_time_samples
    from models import gradient_filter
    from schemes.base import layers_mask
    from train_step import TrainStep, forward_function, make_optimizer

    images, labels = profiler.random_batch(
        models.build_model(args.model_name, args.num_classes, args.input_size, "none", args.bn_mode), args.batch_size)
    print(f"{args.model_name} {args.input_size} px, batch {args.batch_size}, BatchNorm {args.bn_mode}"
          f"{', depthwise convolutions filtered too' if args.depthwise else ''}; "
          f"25th percentiles of {args.rounds} steps each")
    print(f"{'r':>3}{'N':>4}{'filtered convs':>16}{'step ms plain':>15}{'filtered':>10}{'backward plain':>16}"
          f"{'filtered':>10}{'backward ratio':>16}{'step / full':>13}")
    for radius in args.radii:
        for count in args.blocks:
            tf.keras.utils.set_random_seed(0)
            plain = models.build_model(args.model_name, args.num_classes, args.input_size, "none", args.bn_mode)
            filtered = models.build_model(args.model_name, args.num_classes, args.input_size, "none", args.bn_mode)
            filtered.set_weights(plain.get_weights())
            try:
                names = gradient_filter.apply(filtered, radius, count, depthwise=args.depthwise)
            except UserError as error:
                print(f"{radius:>3}{count:>4}  skipped: {error}")
                continue
            steps = []
            for model in (plain, filtered):
                mask = layers_mask(model, gradient_filter.filtered_block_layers(model, count))
                setup = make_optimizer("sgd", 1e-3, 5e-4, 10_000)
                steps.append(TrainStep(model, setup.optimizer, [v for v, keep in zip(model.trainable_weights, mask)
                                                                 if keep]))
            full = TrainStep(plain, make_optimizer("sgd", 1e-3, 5e-4, 10_000).optimizer, plain.trainable_weights)
            forward = forward_function(plain)
            calls = [lambda s=s: s(images, labels)[0].numpy() for s in (*steps, full)]
            calls.append(lambda: forward(images, labels).numpy())
            for _ in range(5):  # compile and warm up
                for call in calls:
                    call()
            plain_ms, filtered_ms, full_ms, forward_ms = (typical_ms(s) for s in wall_time_samples(calls, args.rounds))
            backward = (plain_ms - forward_ms, filtered_ms - forward_ms)
            print(f"{radius:>3}{count:>4}{len(names):>16}{plain_ms:>15.1f}{filtered_ms:>10.1f}{backward[0]:>16.1f}"
                  f"{backward[1]:>10.1f}{backward[1] / backward[0]:>16.2f}{filtered_ms / full_ms:>8.2f} vs "
                  f"{plain_ms / full_ms:.2f}")
    return 0


SHAPES = [  # batch, side, channels in, out, kernel, depthwise
    (8, 56, 64, 64, 3, False), (8, 28, 128, 128, 3, False), (8, 14, 256, 256, 3, False),
    (8, 14, 256, 256, 1, False), (16, 8, 384, 64, 1, False), (16, 4, 960, 160, 1, False),
    (16, 8, 384, 384, 3, True), (16, 4, 960, 960, 3, True)]


def single_convolutions(rounds: int) -> int:
    import tensorflow as tf

    from elastic_trainer.step_timing import typical_ms, wall_time_samples
    from models import gradient_filter

    print(f"backward pass of one stride-1 SAME convolution (input and weight gradients), 25th percentiles "
          f"of {rounds} calls; r 2, r 4: filtered time / plain time")
    print(f"{'batch':>6}{'side':>6}{'in':>6}{'out':>6}{'k':>3}{'kind':>11}{'plain ms':>10}{'r 2':>8}{'r 4':>8}")
    for batch, side, channels, out, kernel, depthwise in SHAPES:
        x = tf.random.normal((batch, side, side, channels))
        w = tf.Variable(tf.random.normal((kernel, kernel, channels, 1 if depthwise else out)))
        upstream = tf.random.normal((batch, side, side, channels if depthwise else out))

        def plain(a, b):
            return (tf.nn.depthwise_conv2d(a, b, [1, 1, 1, 1], "SAME") if depthwise
                    else tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"))

        variants = [plain] + [lambda a, b, r=r: gradient_filter.filtered_convolution(
            a, b, strides=(1, 1), padding="same", radius=(r, r), depthwise=depthwise) for r in (2, 4) if side % r == 0]
        calls = []
        for convolve in variants:
            @tf.function
            def backward(convolve=convolve):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = convolve(x, w)
                return tape.gradient(y, [x, w], output_gradients=upstream)
            calls.append(lambda f=backward: [g.numpy() for g in f()])
        for _ in range(3):
            for call in calls:
                call()
        times = [typical_ms(samples) for samples in wall_time_samples(calls, rounds)]
        print(f"{batch:>6}{side:>6}{channels:>6}{out if not depthwise else channels:>6}{kernel:>3}"
              f"{'depthwise' if depthwise else 'dense':>11}{times[0]:>10.2f}"
              + "".join(f"{t / times[0]:>8.2f}" for t in times[1:]) + ("       -" if len(times) < 3 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
