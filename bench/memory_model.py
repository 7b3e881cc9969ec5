"""Does a selection's training-step memory follow a model the selector can use?

    P(M) = max(F, c + alpha * act[d]) + sum_k M[k] * grad[k]

with act[d] the bytes of every layer input from the deepest selected tensor's layer to the
output (what the backward pass must keep), grad[k] tensor k's size (its gradient; the optimizer's
slots exist for every tensor from the start, see train.Loop), both from the model's shapes, and
F the step's floor: the forward pass's own transient peak, measured on the classifier-only step.
A first fit without the floor (a plain sum) missed held-out selections by 32 % (median) on
MobileNetV2 at 128 px: shallow selections all peak at the forward pass's level. A max keeps the
selector exact: max(F, c + alpha * act[d]) depends on d alone, like the time model's t_dy. Below
the table, a finer variant is fitted too (only inputs every backward pass keeps under the depth
term, each trained kernel's or gamma's layer input added); it was not better (docs/benchmarks/memory.md).

Usage: python -m bench.memory_model [--model_name mobilenetv2] [--input_size 128] [--batch_size 32]
                                     [--bn_mode frozen] [--selections 12]

On CPU, TensorFlow's allocator keeps statistics only with TF_CPU_ALLOCATOR_USE_BFC=true, which
tf_environment sets for every entry point. For each selection it
builds the step as training does, warms it up, resets the peak, runs 3 steps and reads the peak
above what was allocated before them (weights, slots, the batch). F is the classifier alone's (its
gradient taken off); c and alpha are fitted on the contiguous tops (1/4 ... 5/6 of the points)
and every tensor whose peak, gradients taken off, is above 1.1 F; the random selections are held
out. The profiler measures the same model
(profiler.measure_memory, on its own calibration steps) and `profiler.py --validate` checks it.
"""
from __future__ import annotations

from elastic_trainer import tf_environment  # noqa: F401  (first of the repository's modules)
import argparse
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

import models
from models.blocks import leaf_layers
from profiler import (_random_masks, input_mb, measured_peak_mb, memory_columns, random_batch,
                      tensor_points, top_mask)
from train_step import TrainStep, make_optimizer, shared_forward



def layer_kind(layer: tf.keras.layers.Layer, bn_mode: str) -> str:
    """What the backward pass keeps of a layer's input: 'weights' (only when its kernel or gamma
    trains: convolutions, dense layers, frozen BatchNorm), 'always' (whenever the error passes
    through it: activations, BatchNorm in training mode, max pooling), or 'nothing'."""
    if isinstance(layer, (tf.keras.layers.Conv2D, tf.keras.layers.DepthwiseConv2D, tf.keras.layers.Dense)):
        return "weights"
    if isinstance(layer, tf.keras.layers.BatchNormalization):
        return "always" if bn_mode == "train" else "weights"
    if isinstance(layer, (tf.keras.layers.ReLU, tf.keras.layers.Activation, tf.keras.layers.MaxPooling2D)):
        return "always"
    return "nothing"


def finer_columns(model: tf.keras.Model, batch_size: int, bn_mode: str) -> Tuple[np.ndarray, np.ndarray]:
    """(depth_mb, own_mb) per tensor, forward order: the inputs every backward pass down to the
    tensor's layer keeps (a function of the deepest selected tensor, like t_dy), and the input its
    own weight gradient needs (kernels and gammas; additive, like t_dw)."""
    layers = leaf_layers(model)
    kept = [input_mb(layer, batch_size) if layer_kind(layer, bn_mode) == "always" else 0.0 for layer in layers]
    kept_from = np.cumsum(kept[::-1])[::-1]
    index = {id(layer): position for position, layer in enumerate(layers)}
    depth, own = [], []
    for owner, variable in zip(models.owner_layers(model), model.trainable_weights):
        depth.append(kept_from[index[id(owner)]] if id(owner) in index else 0.0)
        needs_input = layer_kind(owner, bn_mode) == "weights" and variable.name.split("/")[-1].split(":")[0] in (
            "kernel", "depthwise_kernel", "gamma")
        own.append(input_mb(owner, batch_size) if needs_input else 0.0)
    return np.array(depth), np.array(own)


def measure_peak(step: TrainStep, images: tf.Tensor, labels: tf.Tensor) -> float:
    """MB the allocator's peak rises during 3 steps above what was allocated before them."""
    for _ in range(2):
        step(images, labels)[0].numpy()
    return measured_peak_mb(lambda: step(images, labels)[0].numpy(), calls=3)


def features(act: np.ndarray, grad: np.ndarray, mask: np.ndarray) -> Tuple[float, float]:
    deepest = int(np.flatnonzero(mask)[0])  # forward order: the first selected is the deepest
    return act[deepest], float(grad[mask == 1].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_name", default="mobilenetv2", choices=sorted(models.MODELS))
    parser.add_argument("--input_size", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--bn_mode", default="frozen", choices=models.BN_MODES)
    parser.add_argument("--selections", type=int, default=12)
    args = parser.parse_args()
    model = models.build_model(args.model_name, 64, args.input_size, "none", args.bn_mode)
    act, grad = memory_columns(model, args.batch_size)
    depth_mb, own_mb = finer_columns(model, args.batch_size, args.bn_mode)
    points = tensor_points(model)
    count = len(points)

    calibration = [("head", top_mask(points, 0.0))] + [(f"top {name}", top_mask(points, share)) for name, share in
                                          (("1/4", 0.25), ("1/3", 1 / 3), ("1/2", 0.5), ("2/3", 2 / 3),
                                           ("3/4", 0.75), ("5/6", 5 / 6))] + [("full", np.ones(count, np.uint8))]
    held_out = [(f"random {i + 1}", m) for i, m in
                enumerate(_random_masks(points, args.selections, np.random.default_rng(27)))]
    images, labels = random_batch(model, args.batch_size, 0)
    setup = make_optimizer("sgd", 1e-4, 5e-4, 1000)
    setup.optimizer._create_all_weights(model.trainable_weights)  # as training does: every slot exists
    forward = shared_forward(model)
    rows: List[Dict] = []
    for label, mask in calibration + held_out:
        step = TrainStep(model, setup.optimizer, [w for w, k in zip(model.trainable_weights, mask) if k],
                         forward=forward)
        kept, gradients = features(act, grad, mask)
        finer = depth_mb[int(np.flatnonzero(mask)[0])] + float(own_mb[mask == 1].sum())
        rows.append(dict(label=label, tensors=int(mask.sum()), act=kept, grad=gradients, finer=finer,
                         measured=measure_peak(step, images, labels)))
    floor = rows[0]["measured"] - rows[0]["grad"]  # the classifier-only step: the forward pass's transient peak
    above = [row for row in rows[:len(calibration)] if row["measured"] - row["grad"] > 1.1 * floor]
    design = np.array([[1.0, row["act"]] for row in above])  # a gradient counts its own bytes
    (constant, alpha), *_ = np.linalg.lstsq(design, np.array([row["measured"] - row["grad"] for row in above]),
                                            rcond=None)
    print(f"{args.model_name} {args.input_size} px, batch {args.batch_size}, BatchNorm {args.bn_mode}; "
          f"{count} tensors; act of the deepest point {act.max():.0f} MB, all gradients {grad.sum():.1f} MB")
    print(f"floor F = {floor:.1f} MB; fit on the {len(above)} calibration selections above 1.1 F: "
          f"c = {constant:.1f} MB, alpha = {alpha:.3f}")
    print("| selection | tensors | act[d] MB | sum grad MB | measured MB | predicted MB | error |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    errors = []
    for position, row in enumerate(rows):
        predicted = max(floor, constant + alpha * row["act"]) + row["grad"]
        error = (predicted - row["measured"]) / row["measured"]
        if position >= len(calibration):
            errors.append(abs(error))
        print(f"| {row['label']} | {row['tensors']} | {row['act']:.1f} | {row['grad']:.2f} | {row['measured']:.1f} | "
              f"{predicted:.1f} | {100 * error:+.1f} % |")
    print(f"held-out random selections: median |error| {100 * np.median(errors):.1f} %, "
          f"max {100 * np.max(errors):.1f} %")
    # The finer model: the depth term counts only inputs every backward pass keeps, and each
    # kernel or gamma adds its layer's input when it trains: max(F, c + alpha * kept(M)) + grads.
    above = [row for row in rows[:len(calibration)] if row["measured"] - row["grad"] > 1.1 * floor]
    design = np.array([[1.0, row["finer"]] for row in above])
    (constant, alpha), *_ = np.linalg.lstsq(design, np.array([row["measured"] - row["grad"] for row in above]),
                                            rcond=None)
    finer_errors = [abs(max(floor, constant + alpha * row["finer"]) + row["grad"] - row["measured"]) / row["measured"]
                    for row in rows[len(calibration):]]
    print(f"finer model (kept by depth + each trained kernel's input): c = {constant:.1f} MB, alpha = {alpha:.3f}; "
          f"held-out median |error| {100 * np.median(finer_errors):.1f} %, max {100 * np.max(finer_errors):.1f} %")


if __name__ == "__main__":
    main()
