"""Gradient filtering: the custom gradient against the patch-averaged gradient, applying it to a
model, and the profiler and scheme on a filtered model."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import profiler
from elastic_trainer import profile_tables
from elastic_trainer.command_line import UserError
from models import gradient_filter

CASES = [  # input side, kernel, stride, padding, radius
    (8, 3, 1, "same", 2), (8, 3, 2, "same", 2), (8, 1, 1, "valid", 2), (9, 3, 2, "valid", 2),
    (8, 1, 2, "same", 2), (9, 1, 2, "valid", 5), (7, 1, 1, "same", 7),
    (16, 3, 1, "same", 4), (14, 3, 1, "same", 7), (12, 5, 2, "same", 3), (7, 3, 1, "valid", 5)]


def _convolution(depthwise: bool, stride: int, padding: str):
    if depthwise:
        return lambda x, w: tf.nn.depthwise_conv2d(x, w, [1, stride, stride, 1], padding.upper())
    return lambda x, w: tf.nn.conv2d(x, w, [1, stride, stride, 1], padding.upper())


def _patch_average(gradient: tf.Tensor, radius: int) -> tf.Tensor:
    """The gradient map replaced by its r x r patch means, at full size."""
    means = tf.nn.avg_pool2d(gradient, radius, radius, "VALID")
    return tf.repeat(tf.repeat(means, radius, axis=1), radius, axis=2)


def _gradients(function, x, w, upstream):
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = function(x, w)
    return tape.gradient(y, [x, w], output_gradients=upstream)


def _reference(function, x, w, upstream):
    """The plain convolution's gradients in float64: TensorFlow's Eigen kernels, not the float32 oneDNN
    ones the CLIs turn on, which compute a wrong filter gradient for some shapes on some CPUs (a 1x1
    stride-2 SAME convolution of 8x8x3 under ONEDNN_MAX_CPU_ISA=AVX2: off by a relative 0.19)."""
    return _gradients(function, *(tf.cast(tensor, tf.float64) for tensor in (x, w, upstream)))


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv", "depthwise"])
@pytest.mark.parametrize("size,kernel,stride,padding,radius", CASES)
def test_filtered_gradient_is_the_patch_averaged_gradient(size, kernel, stride, padding, radius, depthwise):
    rng = np.random.default_rng(size * kernel + radius)
    x = tf.constant(rng.normal(size=(2, size, size, 3)), tf.float32)
    w = tf.constant(rng.normal(size=(kernel, kernel, 3, 2 if depthwise else 4)), tf.float32)
    plain = _convolution(depthwise, stride, padding)
    filtered = lambda a, b: gradient_filter.filtered_convolution(  # noqa: E731
        a, b, strides=(stride, stride), padding=padding, radius=(radius, radius), depthwise=depthwise)
    np.testing.assert_allclose(filtered(x, w), plain(x, w), atol=1e-5)  # the forward is the convolution
    upstream = tf.constant(rng.normal(size=plain(x, w).shape), tf.float32)
    expected = _reference(plain, x, w, _patch_average(upstream, radius))
    for got, want in zip(_gradients(filtered, x, w, upstream), expected):
        np.testing.assert_allclose(got, want, atol=2e-5)
    # A gradient map already constant on patches passes unchanged: the true gradient.
    constant = _patch_average(upstream, radius)
    for got, want in zip(_gradients(filtered, x, w, constant), _reference(plain, x, w, constant)):
        np.testing.assert_allclose(got, want, atol=2e-5)
    # And an arbitrary one does not: the filter really averages.
    assert not np.allclose(_gradients(filtered, x, w, upstream)[1], _reference(plain, x, w, upstream)[1], atol=1e-3)


@pytest.mark.parametrize("size,stride,padding,radius", [(8, 2, "same", 2), (9, 2, "valid", 5), (7, 2, "same", 2)])
def test_pointwise_path_inside_a_tf_function(size, stride, padding, radius):
    """The 1x1 path's shapes are static, so it traces (as training does), odd sides included."""
    x = tf.random.normal((2, size, size, 6))
    w = tf.random.normal((1, 1, 6, 4))
    plain = _convolution(False, stride, padding)
    out = plain(x, w).shape[1]
    radius = min(radius, out)
    if out % radius:
        pytest.skip("radius does not tile")
    upstream = tf.random.normal(plain(x, w).shape)

    @tf.function
    def filtered_gradients(x, w):
        return _gradients(lambda a, b: gradient_filter.filtered_convolution(
            a, b, strides=(stride, stride), padding=padding, radius=(radius, radius), depthwise=False), x, w, upstream)

    for got, want in zip(filtered_gradients(x, w), _reference(plain, x, w, _patch_average(upstream, radius))):
        np.testing.assert_allclose(got, want, atol=2e-5)


def small_backbone_model() -> tf.keras.Model:
    """A registry-shaped model: a nested backbone of three named blocks, then the head."""
    inner = tf.keras.Input((16, 16, 3))
    x = tf.keras.layers.Conv2D(4, 3, padding="same", name="stem_conv")(inner)
    x = tf.keras.layers.BatchNormalization(name="stem_bn")(x)
    for index, stride in ((1, 2), (2, 1)):
        x = tf.keras.layers.Conv2D(8, 1, name=f"block_{index}_expand")(x)
        x = tf.keras.layers.BatchNormalization(name=f"block_{index}_expand_BN")(x)
        x = tf.keras.layers.DepthwiseConv2D(3, strides=stride, padding="same", name=f"block_{index}_depthwise")(x)
        x = tf.keras.layers.ReLU(name=f"block_{index}_relu")(x)
    backbone = tf.keras.Model(inner, x, name="backbone")
    inputs = tf.keras.Input((16, 16, 3))
    features = tf.keras.layers.GlobalAveragePooling2D()(backbone(inputs))
    return tf.keras.Model(inputs, tf.keras.layers.Dense(3, name="classifier")(features))


def test_blocks_follow_the_layer_names():
    found = gradient_filter.blocks(small_backbone_model())
    assert [name for name, _ in found] == ["stem", "block_1", "block_2"]
    assert [layer.name for layer in found[1][1]] == ["block_1_expand", "block_1_expand_BN", "block_1_depthwise"]


def test_apply_filters_the_last_blocks_only_and_keeps_the_forward():
    tf.keras.utils.set_random_seed(0)
    model = small_backbone_model()
    images = tf.random.uniform((4, 16, 16, 3))
    labels = tf.constant([0, 1, 2, 0])

    def gradients():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, model(images), from_logits=True))
        return model(images).numpy(), [g.numpy() for g in tape.gradient(loss, model.trainable_weights)]

    outputs, before = gradients()
    assert gradient_filter.apply(model, 2, 1, depthwise=True) == ["block_2_expand", "block_2_depthwise"]
    filtered_outputs, after = gradients()
    np.testing.assert_allclose(filtered_outputs, outputs, atol=1e-5)
    names = [w.name for w in model.trainable_weights]
    for name, old, new in zip(names, before, after):
        if name.startswith("classifier") or "block_2_depthwise/bias" in name:
            np.testing.assert_allclose(new, old, atol=1e-5)  # above every filtered convolution's kernel
        elif "kernel" in name:
            assert not np.allclose(new, old, atol=1e-6), name  # at or below a filtered convolution
    assert gradient_filter.apply(model, 2, 1) == []  # already filtered: nothing more to do
    assert gradient_filter.apply(small_backbone_model(), 2, 1) == ["block_2_expand"]  # depthwise: exact by default


def test_a_radius_that_does_not_tile_a_map_is_refused():
    with pytest.raises(UserError, match=r"--gf_radius 3 does not tile the 8x8 output of block_2_expand"):
        gradient_filter.apply(small_backbone_model(), 3, 1)
    with pytest.raises(UserError, match="--gf_blocks must be between 1 and 3"):
        gradient_filter.apply(small_backbone_model(), 2, 4)
    with pytest.raises(UserError, match="at least 2"):
        gradient_filter.apply(small_backbone_model(), 1, 1)
    dense = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    with pytest.raises(UserError, match="no convolutional blocks"):
        gradient_filter.apply(dense, 2, 1)


@pytest.mark.slow
def test_profiler_attributes_the_filtered_backward(tmp_path):
    tf.keras.utils.set_random_seed(0)
    model = small_backbone_model()
    gradient_filter.apply(model, 2, 2)
    profile = profiler.profile_model(model, 16, num_iterations=3, repeats=4, logdir=str(tmp_path / "trace"),
                                     meta={"model_name": "small", "gradient_filter": [2, 2]})
    assert profile["coverage"] >= 0.95, profile["unattributed_ops"]
    assert profile_tables.profile_gradient_filter(profile) == [2, 2]


def test_a_profile_of_another_filter_is_refused():
    profile = {"model_name": "m", "input_size": 32, "num_classes": 5, "batch_size": 8, "bn_mode": "frozen",
               "gradient_filter": [2, 4], "tensors": [{"name": "a", "shape": [3]}]}
    arguments = dict(model_name="m", input_size=32, num_classes=5, batch_size=8, tensor_shapes=[[3]],
                     command=profile_tables.profile_command("m", 32, 5, 8, "frozen", (2, 4)))
    profile_tables.check_profile_matches(profile, "p.json", **arguments, gradient_filter=(2, 4))
    with pytest.raises(UserError, match=r"gradient filter \[2, 4\] \(need \[0, 0\].*--gf_radius 2 --gf_blocks 4$"):
        profile_tables.check_profile_matches(profile, "p.json", **arguments)
    with pytest.raises(UserError, match=r"gradient filter \[0, 0\] \(need \[4, 4\]"):
        profile_tables.check_profile_matches({**profile, "gradient_filter": [0, 0]}, "p.json", **arguments,
                                             gradient_filter=(4, 4))
    assert profile_tables.profile_name("m", 64, 10, 32, "frozen", (2, 4)) == "m_64_10_32_gf2x4_profile"
