"""TinyTL's lite residual branches: a no-op at the start, the right tensors train, and the
profiler attributes their backward ops."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import models
import profiler
import schemes
import train_step
from elastic_trainer.command_line import UserError
from models import lite_residual
from test_gradient_filter import small_backbone_model
from train_step import make_optimizer


@pytest.mark.slow
def test_branches_start_as_a_no_op_on_a_registry_backbone():
    tf.keras.utils.set_random_seed(0)
    plain = models.build_model("mobilenetv2", 3, 32, "none", "frozen")
    tf.keras.utils.set_random_seed(0)
    lite = models.build_model("mobilenetv2", 3, 32, "none", "frozen", lite_residual=True)
    for layer in models.backbone_of(plain).layers:  # same backbone and classifier weights
        if not layer.weights:
            continue
        for a, b in zip(layer.get_weights(), models.backbone_of(lite).get_layer(layer.name).get_weights()):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(plain.get_layer("classifier").get_weights()[0],
                                  lite.get_layer("classifier").get_weights()[0])
    images = tf.random.uniform((2, 32, 32, 3), 0, 255)
    np.testing.assert_allclose(lite(images, training=False), plain(images, training=False), atol=1e-5)
    branches = [layer for layer in models.backbone_of(lite).layers if lite_residual.is_branch_layer(layer)]
    assert sum(layer.name.endswith("_lite_add") for layer in branches) == 16  # MobileNetV2's numbered blocks


def test_lite_residual_scheme_trains_branches_biases_and_classifier_only():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Model(*_small_lite())
    setup = make_optimizer("sgd", 0.05, 5e-4, 100)
    images = tf.random.uniform((8, 16, 16, 3))
    labels = tf.constant([0, 1, 2, 0, 1, 2, 0, 1])
    context = schemes.Context(model, setup, _config(), 2, tf.data.Dataset.from_tensors((images, labels)), None,
                              train_step.StepCache(model, setup.optimizer))
    scheme = schemes.SCHEMES["tinytl_lite_residual_training"](context)
    owners = models.owner_layers(model)
    chosen = [w.name for w, keep in zip(model.trainable_weights, scheme.mask) if keep]
    expected = [w.name for w, owner in zip(model.trainable_weights, owners)
                if lite_residual.is_branch_layer(owner) or owner.name == "classifier"
                or any(w is getattr(owner, name, None) for name in ("bias", "beta"))]
    assert chosen == expected and any("_lite_conv1" in name for name in chosen)
    assert not any(name.endswith("kernel:0") and "_lite_" not in name and "classifier" not in name for name in chosen)
    before = [w.numpy().copy() for w in model.trainable_weights]
    step = context.steps.get(scheme.mask)
    for _ in range(3):  # the zero-initialised conv2 first, then conv1 through it
        step(images, labels)
    changed = [w.name for w, old in zip(model.trainable_weights, before) if not np.array_equal(w.numpy(), old)]
    assert changed == chosen
    with pytest.raises(UserError, match="no lite residual branches"):
        schemes.SCHEMES["tinytl_lite_residual_training"](schemes.Context(
            small_backbone_model(), setup, _config(), 2, tf.data.Dataset.from_tensors((images, labels)), None,
            train_step.StepCache(model, setup.optimizer)))


@pytest.mark.slow
def test_profiler_attributes_the_branches(tmp_path):
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Model(*_small_lite())
    profile = profiler.profile_model(model, 16, num_iterations=3, repeats=4, logdir=str(tmp_path / "trace"),
                                     meta={"model_name": "small_lite"})
    assert profile["coverage"] >= 0.95, profile["unattributed_ops"]
    names = [t["name"] for t in profile["tensors"]]
    assert any("_lite_conv2" in name for name in names)


def test_a_backbone_without_numbered_blocks_is_refused():
    inputs = tf.keras.Input((8, 8, 3))
    plain = tf.keras.Model(inputs, tf.keras.layers.Conv2D(4, 3, name="conv")(inputs))
    with pytest.raises(UserError, match="no numbered blocks"):
        lite_residual.add_lite_residuals(plain)


def _small_lite():
    """(inputs, outputs) of small_backbone_model with lite residual branches."""
    plain = small_backbone_model()
    backbone = lite_residual.add_lite_residuals(models.backbone_of(plain))
    inputs = tf.keras.Input((16, 16, 3))
    features = tf.keras.layers.GlobalAveragePooling2D()(backbone(inputs))
    return inputs, tf.keras.layers.Dense(3, name="classifier")(features)


def _config():
    from test_train import config
    return config(train_type="tinytl_lite_residual_training")


@pytest.mark.parametrize("constructor,size", [(tf.keras.applications.MobileNetV2, 80),  # 5 -> 3 px at block_13
                                              (tf.keras.applications.VGG16, 32)])  # a block reading the input layer
@pytest.mark.slow
def test_branches_follow_odd_sizes_and_input_layers(constructor, size):
    backbone = constructor(include_top=False, weights=None, input_shape=(size, size, 3))
    lite = lite_residual.add_lite_residuals(backbone)
    images = tf.random.uniform((1, size, size, 3))
    np.testing.assert_allclose(lite(images), backbone(images), atol=1e-5)


def test_blocks_that_are_not_images_are_refused():
    inputs = tf.keras.Input((4, 8))
    tokens = tf.keras.layers.Dense(8, name="encoderblock_1_mlp")(inputs)  # ViT-like: 3-D tokens
    with pytest.raises(UserError, match="does not map images to images"):
        lite_residual.add_lite_residuals(tf.keras.Model(inputs, tokens))
