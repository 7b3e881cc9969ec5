"""models/gradient_check.py: every distinct convolution of a model, its float32 gradients against float64."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf

from elastic_trainer import profile_tables
from models import gradient_check


def small_model() -> tf.keras.Model:
    inputs = tf.keras.Input((8, 8, 3))
    x = tf.keras.layers.Conv2D(8, 1, strides=2, padding="same", name="a")(inputs)
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same", name="b")(x)
    x = tf.keras.layers.Conv2D(8, 1, name="c")(x)
    x = tf.keras.layers.Conv2D(8, 1, name="d")(x)  # the same convolution as c: checked once
    return tf.keras.Model(inputs, tf.keras.layers.Dense(2)(tf.keras.layers.Flatten()(x)))


def test_the_distinct_convolutions_in_forward_order():
    assert [c.describe() for c in gradient_check.convolutions(small_model())] == [
        "conv 1x1 stride 2 SAME, 3 -> 8 channels at 8x8", "depthwise 3x3 stride 1 SAME, 8 -> 8 channels at 4x4",
        "conv 1x1 stride 1 VALID, 8 -> 8 channels at 4x4"]


def _float32_by_float64(change=lambda convolution, gradients: gradients):
    """gradient_check._gradients whose float32 side is float64's, cast (right on any CPU, so the tests do not
    depend on this machine's kernels), then changed by `change` as a wrong kernel would change it."""
    plain = gradient_check._gradients

    def gradients(convolution, x, w, upstream):
        if x.dtype != tf.float32:
            return plain(convolution, x, w, upstream)
        exact = plain(convolution, *(tf.cast(t, tf.float64) for t in (x, w, upstream)))
        return change(convolution, [tf.cast(g, tf.float32) for g in exact])
    return gradients


def test_the_error_is_the_float32_sides_share(monkeypatch):
    """A gradient made wrong on the float32 side alone (as a wrong kernel is) is measured by its share of
    the float64 gradient; float32's rounding alone stays far below the tolerance."""
    convolution = gradient_check.convolutions(small_model())[1]
    monkeypatch.setattr(gradient_check, "_gradients", _float32_by_float64())
    assert max(gradient_check.relative_errors(convolution, 2)) < 1e-6
    monkeypatch.setattr(gradient_check, "_gradients", _float32_by_float64(lambda c, g: [g[0], g[1] * 1.25]))
    input_error, kernel_error = gradient_check.relative_errors(convolution, 2)
    assert input_error < 1e-6 and kernel_error == pytest.approx(0.25, rel=1e-4)


def test_a_wrong_gradient_is_named_with_its_remedy(monkeypatch):
    model = small_model()
    measured = gradient_check.check(model, 2)  # this machine's own kernels: whatever it finds, it says
    assert measured["checked"] == 3 and (gradient_check.warning(measured) == "") == (measured["wrong"] == [])
    monkeypatch.setattr(gradient_check, "_gradients", _float32_by_float64())
    right = gradient_check.check(model, 2)
    assert right["wrong"] == [] and right["largest_error"] < 1e-6 and gradient_check.warning(right) == ""
    negated = lambda convolution, g: [g[0], -g[1]] if convolution.strides == (2, 2) else g  # noqa: E731
    monkeypatch.setattr(gradient_check, "_gradients", _float32_by_float64(negated))
    record = gradient_check.check(model, 2)
    assert [w["convolution"] for w in record["wrong"]] == ["conv 1x1 stride 2 SAME, 3 -> 8 channels at 8x8"]
    assert record["wrong"][0]["kernel_gradient"] == pytest.approx(2.0, rel=1e-4)
    message = gradient_check.warning(record)
    assert "WRONG convolution gradients for 1 of the model's 3" in message and "TF_ENABLE_ONEDNN_OPTS=0" in message


def test_a_run_on_a_profile_whose_check_failed_is_warned(monkeypatch, caplog):
    """The profiler keeps the check in the profile; a run that loads it under the same oneDNN setting
    repeats the warning, one under the remedy does not."""
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(2)])
    profile = {"model_name": "m", "input_size": 8, "num_classes": 2, "batch_size": 2, "bn_mode": "frozen",
               "tensors": [{"name": w.name, "shape": w.shape.as_list(), "t_dw_ms": 1.0, "t_dy_ms": 0.0}
                           for w in model.trainable_weights],
               "T_fp_ms": 1.0, "T_bp_ms": 1.0, "T_full_ms": 2.0, "coverage": 1.0,
               "gradient_check": {"warning": "WRONG gradients", "onednn": "1"}}
    monkeypatch.setattr(profile_tables, "load_profile", lambda path: profile)
    monkeypatch.setattr(profile_tables.os.path, "exists", lambda path: True)

    class Config:
        model_name, input_size, num_classes, batch_size, bn_mode = "m", 8, 2, 2, "frozen"
        gradient_filter, profile, train_type, memory_budget_mb = (0, 0), "p.json", "elastic_training", 0.0

    for onednn, warned in (("1", True), ("0", False)):
        monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", onednn)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert profile_tables.load_profile_for(Config, model) is profile
        assert ("WRONG gradients (found by the profiler, p.json)" in caplog.text) == warned


def test_float64_is_not_the_kernel_under_test():
    """The float64 convolution gradient agrees with numpy's (an independent reference), so the check's
    reference is right whatever kernels float32 gets."""
    rng = np.random.default_rng(1)
    x, w, upstream = rng.normal(size=(2, 8, 8, 3)), rng.normal(size=(1, 1, 3, 4)), rng.normal(size=(2, 4, 4, 4))
    convolution = gradient_check.Convolution(False, (8, 8, 3), (1, 1, 3, 4), (2, 2), "SAME", (1, 1))
    _, kernel_gradient = gradient_check._gradients(convolution, *(tf.constant(a, tf.float64) for a in (x, w, upstream)))
    # 1x1 stride 2 SAME on an even side: output (i, j) sees input (2i, 2j)
    expected = np.einsum("nijc,nijo->co", x[:, ::2, ::2, :], upstream)[None, None]
    np.testing.assert_allclose(kernel_gradient.numpy(), expected, rtol=1e-12)
