"""BatchNorm statistics re-estimated on target images, forward only (AdaBN: Li et al. 2016;
Schneider et al., NeurIPS'20): the backbone's moving means and variances become those of the
images given, without any gradient.

Each BatchNorm layer's statistics are those of its input when every layer below it normalises
with its own batch statistics (the backbone run in training mode), pooled over all the batches:
mean = E[x], variance = E[x^2] - E[x]^2 over images and positions. The images pass through the
model's own augmentation (in inference mode: none) and preprocessing first, as test images do.
"""
from __future__ import annotations

from typing import List, Sequence

import tensorflow as tf

from models.blocks import backbone_of


def batchnorm_layers(backbone: tf.keras.Model) -> List[tf.keras.layers.BatchNormalization]:
    """The backbone's own BatchNorm layers, in its layer order."""
    return [layer for layer in backbone.layers if isinstance(layer, tf.keras.layers.BatchNormalization)]


def recalibrate_batchnorm(model: tf.keras.Model, batches: Sequence) -> int:
    """Set the moving mean and variance of every BatchNorm layer in `model`'s backbone to the
    statistics of `batches` ((images, labels) pairs, or images) as the module docstring says.
    Returns how many layers it set (0 when the backbone has none or no batch is given)."""
    backbone = backbone_of(model)
    layers = batchnorm_layers(backbone)
    if not layers or not batches:
        return 0
    if backbone is model:  # no nested backbone: the images go in as they are
        to_backbone = lambda images, training: images  # noqa: E731
    else:  # the model's augmentation (off in inference mode) and preprocessing
        to_backbone = tf.keras.Model(model.inputs, backbone.get_input_at(-1))  # (its call in `model`)
    inputs_of = tf.keras.Model(backbone.inputs, [layer.input for layer in layers])
    axes = [list(range(len(layer.input.shape) - 1)) for layer in layers]  # all but the channels

    @tf.function
    def moments(images):
        features = inputs_of(to_backbone(images, training=False), training=True)
        features = features if isinstance(features, (list, tuple)) else [features]  # (one layer: one tensor)
        return ([tf.reduce_mean(x, axis) for x, axis in zip(features, axes)],
                [tf.reduce_mean(tf.square(x), axis) for x, axis in zip(features, axes)])

    sums = squares = None
    count = 0  # images
    for batch in batches:  # (the training-mode calls also move the statistics; they are set below)
        images = batch[0] if isinstance(batch, (tuple, list)) else batch
        size = int(images.shape[0])
        means, mean_squares = moments(images)
        means, mean_squares = [m * size for m in means], [m * size for m in mean_squares]
        sums = means if sums is None else [a + b for a, b in zip(sums, means)]
        squares = mean_squares if squares is None else [a + b for a, b in zip(squares, mean_squares)]
        count += size
    for layer, total, total_squares in zip(layers, sums, squares):
        mean = total / count
        layer.moving_mean.assign(mean)
        layer.moving_variance.assign(tf.maximum(total_squares / count - tf.square(mean), 0.0))
    return len(layers)
