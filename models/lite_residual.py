"""TinyTL's lite residual learning (Cai et al., "TinyTL: Reduce Memory, Not Parameters for
Efficient On-Device Learning", NeurIPS 2020) for Keras backbones.

Each numbered block (`block_3_*`, `conv4_block2_*`) gets a branch from its input to its output:

    input -> average pooling (the block's stride, times 2 where the output side is even)
          -> 3x3 convolution to reduced channels (a quarter of the input's, a multiple of 8)
          -> group normalization (8 groups) -> ReLU
          -> 1x1 convolution to the block's output channels (zero-initialised)
          -> bilinear upsampling back to the output's size -> added to the block's output.

The branch runs at half the output resolution with few channels, so its activations are small
(TinyTL's point). Its last convolution starts at zero, so the model computes what the backbone did
until the branches learn. The backbone is rebuilt from its Keras config with the branches inserted
and its weights copied by layer name.
"""
from __future__ import annotations

from typing import Dict, List

import tensorflow as tf

from elastic_trainer.command_line import UserError
from models.blocks import BLOCK_PATTERN

MARK = "_lite_"  # in the names of every branch layer


def is_branch_layer(layer: tf.keras.layers.Layer) -> bool:
    return MARK in layer.name


def _entry(layer: tf.keras.layers.Layer, inbound: List[str]) -> Dict:
    """A functional-config entry calling `layer` on the outputs of the layers named `inbound`."""
    return {"class_name": layer.__class__.__name__, "config": layer.get_config(), "name": layer.name,
            "inbound_nodes": [[[name, 0, 0, {}] for name in inbound]]}


def _branch(key: str, source: str, target: str, in_shape, out_shape) -> List[Dict]:
    """Config entries of one block's lite residual, from layer `source` to `target`'s output."""
    if len(in_shape) != 4 or len(out_shape) != 4:
        raise UserError(f"block {key} does not map images to images ({in_shape} -> {out_shape}): lite residual "
                        f"learning is for the CNN backbones")
    in_side, out_side, channels_in, channels_out = in_shape[1], out_shape[1], in_shape[-1], out_shape[-1]
    stride = -(-in_side // max(out_side, 1))  # a SAME stride-2 layer rounds its output up (7 -> 4)
    down = 2 if out_side % 2 == 0 and out_side >= 2 else 1
    pool = stride * down
    if -(-in_side // pool) * down != out_side:
        raise UserError(f"block {key} maps {in_side} px to {out_side} px, which its lite residual cannot follow "
                        f"(pooling by {pool}, upsampling by {down}); try another --input_size")
    middle = 8 * max(1, channels_in // 32)
    layers, previous = [], source
    steps = []
    if pool > 1:
        steps.append(tf.keras.layers.AveragePooling2D(pool, pool, padding="same", name=f"{key}{MARK}pool"))
    steps += [tf.keras.layers.Conv2D(middle, 3, padding="same", use_bias=False, name=f"{key}{MARK}conv1"),
              tf.keras.layers.GroupNormalization(8, name=f"{key}{MARK}norm"),
              tf.keras.layers.ReLU(name=f"{key}{MARK}relu"),
              tf.keras.layers.Conv2D(channels_out, 1, use_bias=False, kernel_initializer="zeros",
                                     name=f"{key}{MARK}conv2")]
    if down > 1:
        steps.append(tf.keras.layers.UpSampling2D(down, interpolation="bilinear", name=f"{key}{MARK}up"))
    for layer in steps:
        layers.append(_entry(layer, [previous]))
        previous = layer.name
    layers.append(_entry(tf.keras.layers.Add(name=f"{key}{MARK}add"), [target, previous]))
    return layers


def add_lite_residuals(backbone: tf.keras.Model) -> tf.keras.Model:
    """`backbone` rebuilt with a lite residual on each numbered block, its weights copied."""
    config = backbone.get_config()
    entries = config["layers"]
    keys = {entry["name"]: match.group(1) for entry in entries if (match := BLOCK_PATTERN.match(entry["name"]))}
    if not keys:
        raise UserError(f"{backbone.name} has no numbered blocks (block_N, convN_blockM): lite residual "
                        f"learning is for the CNN backbones")
    last = {key: name for name, key in keys.items()}  # config order: the block's last layer wins
    first: Dict[str, Dict] = {}
    for entry in entries:
        first.setdefault(keys.get(entry["name"]), entry)
    layers = {layer.name: layer for layer in backbone.layers}
    shapes = {name: tuple(layer.output.shape) for name, layer in layers.items()}
    renamed: Dict[str, str] = {}
    rebuilt = []
    for entry in entries:
        for node in entry["inbound_nodes"]:
            for inbound in node:
                inbound[0] = renamed.get(inbound[0], inbound[0])
        rebuilt.append(entry)
        key = keys.get(entry["name"])
        if key is not None and last[key] == entry["name"]:
            source = first[key]["inbound_nodes"][0][0][0]  # already renamed: the previous block's sum
            rebuilt += _branch(key, source, entry["name"], shapes[source], shapes[entry["name"]])
            renamed[entry["name"]] = f"{key}{MARK}add"
            shapes[renamed[entry["name"]]] = shapes[entry["name"]]
    config["layers"] = rebuilt
    config["output_layers"] = [[renamed.get(name, name), node, index] for name, node, index in config["output_layers"]]
    try:
        model = tf.keras.Model.from_config(config)
    except (ValueError, TypeError) as error:
        raise UserError(f"could not add lite residual branches to {backbone.name}: {error}") from None
    for layer in backbone.layers:
        if layer.weights:
            model.get_layer(layer.name).set_weights(layer.get_weights())
    return model
