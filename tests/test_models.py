"""The model registry: the paper's head, pinned tensor counts, weights files, bad input."""
from __future__ import annotations

import h5py
import numpy as np
import pytest
import tensorflow as tf

import models
from elastic_trainer.command_line import UserError

# Trainable tensors of backbone + classifier (kernel, bias) with the paper's head.
EXPECTED_TENSORS = {"resnet50": 214, "vgg16": 28, "mobilenetv2": 158, "vit": 200, "efficientnet_lite0": 149}


@pytest.mark.parametrize("model_name", sorted(EXPECTED_TENSORS))
@pytest.mark.slow
def test_each_model_builds_with_the_papers_head(model_name):
    model = models.build_model(model_name, num_classes=7, input_size=32, weights="none")
    assert len(model.trainable_weights) == EXPECTED_TENSORS[model_name]
    layer_types = [type(layer).__name__ for layer in model.layers]
    assert layer_types[1:3] == ["RandomFlip", "RandomRotation"]
    assert layer_types[-2:] == ["Dropout", "Dense"]
    assert model.get_layer("dropout").rate == pytest.approx(0.2)
    if model_name != "vit":  # ViT's backbone already returns its class token
        assert layer_types[-3] == "GlobalAveragePooling2D"
    assert model.get_layer(models.CLASSIFIER_NAME).units == 7
    batch_norms = [layer for layer in model.get_layer(model_name).layers
                   if isinstance(layer, tf.keras.layers.BatchNormalization)]
    assert all(layer.momentum <= models.BATCH_NORM_MOMENTUM for layer in batch_norms)
    logits = model(tf.random.uniform((2, 32, 32, 3), 0, 255), training=False)
    assert logits.shape == (2, 7) and np.all(np.isfinite(logits.numpy()))


@pytest.mark.parametrize("input_size", [33, 57, 96, 224])
@pytest.mark.slow
def test_cnn_accepts_any_input_size_from_32(input_size):
    model = models.build_model("mobilenetv2", 3, input_size, weights="none")
    assert model(tf.zeros((1, input_size, input_size, 3))).shape == (1, 3)


@pytest.mark.slow
def test_weights_round_trip_and_transfer_to_another_head(tmp_path):
    path = str(tmp_path / "source.h5")
    source = models.build_model("mobilenetv2", 10, 32, weights="none")
    models.save_weights(source, path, "mobilenetv2", 10, 32)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left behind

    same = models.build_model("mobilenetv2", 10, 32, weights=path)
    for saved, loaded in zip(source.get_weights(), same.get_weights()):
        np.testing.assert_array_equal(saved, loaded)

    # Another task and input size: the backbone transfers, the classifier starts fresh.
    target = models.build_model("mobilenetv2", 4, 48, weights=path)
    for saved, loaded in zip(source.get_layer("mobilenetv2").get_weights(),
                             target.get_layer("mobilenetv2").get_weights()):
        np.testing.assert_array_equal(saved, loaded)
    assert target.get_layer(models.CLASSIFIER_NAME).kernel.shape == (1280, 4)


@pytest.mark.parametrize("kwargs, message", [
    (dict(model_name="resnet18"), "unknown model 'resnet18'; choose one of: resnet50, vgg16"),
    (dict(input_size=31), "too small for mobilenetv2: it needs at least 32"),
    (dict(model_name="vit", input_size=40), "multiple of 16"),
    (dict(weights="/no/such/file.h5"), "no such file"),
    (dict(num_classes=1), "at least 2"),
])
def test_bad_model_arguments_are_user_errors(kwargs, message):
    arguments = dict(model_name="mobilenetv2", num_classes=5, input_size=32, weights="none")
    arguments.update(kwargs)
    with pytest.raises(UserError, match=message):
        models.build_model(**arguments)


@pytest.mark.slow
def test_weights_of_another_architecture_are_refused(tmp_path):
    path = str(tmp_path / "vgg.h5")
    models.save_weights(models.build_model("vgg16", 3, 32, "none"), path, "vgg16", 3, 32)
    with pytest.raises(UserError, match="holds vgg16 weights, but the model is mobilenetv2"):
        models.build_model("mobilenetv2", 3, 32, weights=path)


@pytest.mark.slow
def test_foreign_or_corrupt_weight_files_are_refused(tmp_path):
    not_hdf5 = tmp_path / "notes.h5"
    not_hdf5.write_text("hello")
    with pytest.raises(UserError, match="not an HDF5 weights file"):
        models.build_model("mobilenetv2", 3, 32, weights=str(not_hdf5))
    untagged = tmp_path / "untagged.h5"
    with h5py.File(untagged, "w") as handle:
        handle.create_dataset("x", data=[1.0])
    with pytest.raises(UserError, match="not saved by this project"):
        models.build_model("mobilenetv2", 3, 32, weights=str(untagged))


def test_offline_imagenet_weights_say_where_keras_caches_them(offline, monkeypatch, tmp_path):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))  # an empty cache: Keras must download
    with pytest.raises(UserError) as error:
        models.build_model("resnet50", 10, 32, weights="imagenet")
    message = str(error.value)
    expected = tmp_path / "models" / "resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5"
    assert "no network" in message and str(expected) in message
    assert "--weights none" in message


@pytest.mark.parametrize("bn_mode, changes", [("frozen", False), ("train", True)])
@pytest.mark.slow
def test_bn_mode_decides_whether_a_training_step_moves_batchnorm_statistics(bn_mode, changes):
    from train_step import TrainStep, classification_loss, make_optimizer

    tf.keras.utils.set_random_seed(0)
    model = models.build_model("mobilenetv2", 3, 32, weights="none", bn_mode=bn_mode)
    batch_norms = [layer for layer in model.get_layer("mobilenetv2").layers
                   if isinstance(layer, tf.keras.layers.BatchNormalization)]
    statistics = lambda: [v.numpy().copy() for layer in batch_norms  # noqa: E731
                          for v in (layer.moving_mean, layer.moving_variance)]
    before = statistics()
    images, labels = tf.random.uniform((4, 32, 32, 3), 0, 255), tf.constant([0, 1, 2, 0], tf.int64)
    step = TrainStep(model, make_optimizer("sgd", 0.1, 0.0, 10).optimizer, model.trainable_weights)
    step(images, labels)
    moved = [not np.array_equal(old, new) for old, new in zip(before, statistics())]
    assert all(moved) if changes else not any(moved)
    # gammas and betas still get gradients in both modes (they train when selected)
    with tf.GradientTape() as tape:
        loss = classification_loss(labels, model(images, training=True))
    gradients = tape.gradient(loss, [layer.gamma for layer in batch_norms])
    assert all(g is not None for g in gradients) and any(float(tf.reduce_max(tf.abs(g))) > 0 for g in gradients)


def test_unknown_bn_mode_is_refused():
    with pytest.raises(UserError, match="unknown BatchNorm mode 'eval'; choose one of: frozen, train"):
        models.build_model("mobilenetv2", 3, 32, weights="none", bn_mode="eval")


def test_keras_applications_beyond_the_registry_get_the_same_head():
    model = models.build_keras_application("MobileNet", 5, 32, bn_mode="frozen")
    assert model.name == "keras.MobileNet_classifier" and model.output_shape == (None, 5)
    assert models.owner_layers(model)[-1].name == models.CLASSIFIER_NAME
    with pytest.raises(UserError, match="unknown Keras application 'Nope'.*DenseNet121"):
        models.build_keras_application("Nope", 5, 32)


def test_a_zero_head_sends_the_backbone_no_gradient_at_first_and_keeps_the_rest_of_the_init():
    """Issue 61: --head_init zeros. With the classifier's kernel at zero every logit is 0, so the
    loss's gradient with respect to the pooled features (kernel @ (p - y)) is zero: the first
    step trains the head alone, and the backbone only moves once the head carries class
    information. Everything else starts exactly as with Keras's init (the same random stream)."""
    tf.keras.utils.set_random_seed(0)
    glorot = models.build_model("mobilenetv2", 5, 32, weights="none", bn_mode="frozen")
    tf.keras.utils.set_random_seed(0)
    zeros = models.build_model("mobilenetv2", 5, 32, weights="none", bn_mode="frozen", head_init="zeros")
    classifier = zeros.get_layer(models.CLASSIFIER_NAME)
    assert not np.any(classifier.kernel.numpy())
    for a, b in zip(glorot.get_layer("mobilenetv2").get_weights(), zeros.get_layer("mobilenetv2").get_weights()):
        np.testing.assert_array_equal(a, b)
    images = tf.random.uniform((4, 32, 32, 3), 0, 255, seed=1)
    labels = tf.constant([0, 1, 2, 3])
    for model, backbone_moves in ((glorot, True), (zeros, False)):
        with tf.GradientTape() as tape:
            loss = tf.keras.losses.sparse_categorical_crossentropy(labels, model(images, training=True),
                                                                   from_logits=True)
        gradients = dict(zip([v.name for v in model.trainable_variables],
                             tape.gradient(loss, model.trainable_variables)))
        backbone = [g for name, g in gradients.items() if not name.startswith(models.CLASSIFIER_NAME)]
        assert any(float(tf.reduce_max(tf.abs(g))) > 0 for g in backbone) == backbone_moves
        assert float(tf.reduce_max(tf.abs(gradients[classifier.kernel.name]))) > 0
    with pytest.raises(UserError, match="unknown --head_init 'ones'; choose one of: glorot, zeros"):
        models.build_model("mobilenetv2", 5, 32, weights="none", head_init="ones")
