"""How a registry model is put together: its nested backbone and the backbone's numbered blocks,
through whose names the model surgery (gradient_filter.py, lite_residual.py) and the block-range
schemes find blocks. Nothing here imports the rest of the package.
"""
from __future__ import annotations

import re
from typing import Dict, List, Tuple

import tensorflow as tf

# both: in Keras 2.15 DepthwiseConv2D derives from the base Conv, not from Conv2D
CONVOLUTIONS = (tf.keras.layers.Conv2D, tf.keras.layers.DepthwiseConv2D)


def leaf_layers(model: tf.keras.Model) -> List[tf.keras.layers.Layer]:
    """Every leaf layer in forward (topological) order, nested models opened."""
    layers = []
    for layer in model.layers:
        layers += leaf_layers(layer) if isinstance(layer, tf.keras.Model) else [layer]
    return layers


def backbone_of(model: tf.keras.Model) -> tf.keras.Model:
    """The nested backbone of a registry model (the model itself when it has none)."""
    nested = [layer for layer in model.layers if isinstance(layer, tf.keras.Model)]
    return nested[0] if nested else model


BLOCK_PATTERN = re.compile(r"(.*?block_?\d+)")  # a numbered block's name prefix (block_3, conv4_block2)


def _block_key(conv_name: str) -> str:
    match = BLOCK_PATTERN.match(conv_name)
    return match.group(1) if match else re.sub(r"_(depthwise|project|expand|conv)$", "", conv_name)


def blocks(model: tf.keras.Model) -> List[Tuple[str, List[tf.keras.layers.Layer]]]:
    """The backbone's blocks in forward order: (name, layers with weights). A layer without a
    convolution of its own (BatchNorm) belongs to the block of the convolution before it."""
    found: Dict[str, List[tf.keras.layers.Layer]] = {}
    current = None
    for layer in backbone_of(model).layers:
        if isinstance(layer, CONVOLUTIONS):
            current = _block_key(layer.name)
        if layer.weights and current is not None:
            found.setdefault(current, []).append(layer)
    return list(found.items())


def resolution_stages(model: tf.keras.Model) -> List[Tuple[int, int]]:
    """The backbone's resolution stages as [first block, stop block) pairs over `blocks`: runs of
    consecutive blocks whose last convolution outputs the same spatial size (MobileNetV2 at any
    input size: blocks 0-1, 2-3, 4-6, 7-13, 14-18)."""
    sizes = []
    for _, layers in blocks(model):
        last = [layer for layer in layers if isinstance(layer, CONVOLUTIONS)][-1]
        sizes.append(tuple(last.output.shape[1:-1]))
    stages: List[Tuple[int, int]] = []
    for index, size in enumerate(sizes):
        if stages and sizes[stages[-1][0]] == size:
            stages[-1] = (stages[-1][0], index + 1)
        else:
            stages.append((index, index + 1))
    return stages
