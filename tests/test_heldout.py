"""elastic_heldout_training: ElasticTrainer's update, scored on images it was not made on."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import schemes
import train_step
from test_train import make_context, tiny_data, tiny_model
from train_step import make_optimizer


def _batches(dataset, count):
    return [tuple(tensor.numpy() for tensor in batch) for batch in dataset.take(count)]


def test_the_update_is_scored_on_the_other_batch():
    """-sum(g_B(w1) * dw_A) per tensor, and to first order the loss drop the update from A gives B."""
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    setup = make_optimizer("sgd", 1e-5, 0.0, 100)  # a small step: first order holds
    (a_images, a_labels), = tiny_data(seed=1).take(1)
    (b_images, b_labels), = tiny_data(seed=2).take(1)
    probe = schemes.ImportanceProbe(model, setup.optimizer)
    scored = probe.loss_change([(a_images, a_labels)], scored=[(b_images, b_labels)])
    own = probe.loss_change([(a_images, a_labels)])
    assert scored.shape == own.shape and not np.allclose(scored, own)
    np.testing.assert_array_equal(own, probe.loss_change([(a_images, a_labels)], scored=[(a_images, a_labels)]))
    loss_b = lambda: float(train_step.classification_loss(b_labels, model(b_images, training=True)))  # noqa: E731
    before = loss_b()
    with train_step.preserved_state(model, setup.optimizer):
        setup.optimizer.apply_gradients(zip(probe._gradients(a_images, a_labels), model.trainable_weights))
        after = loss_b()
    assert scored.sum() == pytest.approx(before - after, rel=0.05)


def _recording(scheme):
    calls = []
    original = scheme.probe.loss_change

    def record(batches, scored=None):
        calls.append((batches, scored))
        return original(batches, scored=scored)
    scheme.probe.loss_change = record
    return calls


def test_it_scores_on_the_validation_split_in_the_seeds_order_and_resumes_there():
    validation = tiny_data(batches=3, seed=7)
    images = {image.tobytes() for batch, _ in _batches(validation, 3) for image in batch}

    def scheme_of(seed):
        context = make_context(tiny_model(), "elastic_heldout_training", seed=seed)
        context.validation = validation
        return schemes.SCHEMES["elastic_heldout_training"](context), context

    scheme, context = scheme_of(0)
    calls = _recording(scheme)
    scheme.reselect(0)
    scheme.reselect(4)
    scored = [np.asarray(batch[0][0]) for _, batch in calls]
    assert all(image.tobytes() in images for batch in scored for image in batch)  # validation images only
    assert not np.array_equal(scored[0], scored[1])  # the next batch each time
    updates = [np.asarray(batches[0][0]) for batches, _ in calls]
    assert not np.array_equal(updates[0], updates[1])  # each probe takes the next training probe batch
    assert scheme.state()["held_out_position"] == 2 and scheme.probe_position == 2
    again = schemes.SCHEMES["elastic_heldout_training"](context)
    again.load_state(scheme.state())
    third = again.scored_batches()[0][0].numpy()
    fresh, _ = scheme_of(0)
    assert np.array_equal(third, [fresh.scored_batches()[0][0].numpy() for _ in range(3)][-1])
    other, _ = scheme_of(1)  # another seed scores on the images in another order
    assert not np.array_equal(other.scored_batches()[0][0].numpy(), scored[0])


def test_without_a_validation_split_it_scores_on_the_next_training_probe_batch():
    model = tiny_model()
    context = make_context(model, "elastic_heldout_training")
    scheme = schemes.SCHEMES["elastic_heldout_training"](context)
    calls = _recording(scheme)
    scheme.reselect(0)
    (updates, scored), = calls
    stream = _batches(tiny_data(), 2)  # the tiny context's probe stream: its training batches in order
    assert np.array_equal(np.asarray(updates[0][0]), stream[0][0])
    assert np.array_equal(np.asarray(scored[0][0]), stream[1][0])
    assert scheme.probe_position == 2


def test_a_pooled_update_of_one_batch_is_the_paired_one():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    probe = schemes.ImportanceProbe(model, make_optimizer("sgd", 0.01, 0.0, 100).optimizer)
    (a, b), (s, _) = _batches(tiny_data(batches=2, seed=1), 2), _batches(tiny_data(batches=2, seed=2), 2)
    np.testing.assert_allclose(probe.pooled_loss_change([a], [s]), probe.loss_change([a], scored=[s]),
                               rtol=1e-5, atol=1e-9)
    # the same batch twice is that batch: means, not sums
    np.testing.assert_allclose(probe.pooled_loss_change([a, a], [s, s]), probe.pooled_loss_change([a], [s]),
                               rtol=1e-5, atol=1e-9)
    assert not np.allclose(probe.pooled_loss_change([a, b], [s]), probe.loss_change([a, b], scored=[s, s]))
    probe.pooled_loss_change([a, b], [s])
    assert probe.last_batch is b  # as loss_change leaves it: the last update batch, not a scored one
    np.testing.assert_array_equal(probe.pooled_loss_change([], [s]), np.zeros(len(model.trainable_weights)))


def test_the_pooled_look_is_one_update_on_the_mean_gradient_scored_by_the_mean_gradient_after_it():
    """-g_S(w1) . dw, dw = w1 - w0 the optimizer's step on the update batches' mean gradient and
    g_S the scored batches' mean gradient; to first order the scored batches' mean loss drop."""
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    setup = make_optimizer("sgd", 1e-5, 0.0, 100)  # a small step: first order holds
    updates, scored = _batches(tiny_data(batches=3, seed=1), 3), _batches(tiny_data(batches=2, seed=2), 2)
    probe = schemes.ImportanceProbe(model, setup.optimizer)
    before_weights = [w.numpy() for w in model.variables]
    pooled = probe.pooled_loss_change(updates, scored)
    for weight, value in zip(model.variables, before_weights):  # state restored
        np.testing.assert_array_equal(weight.numpy(), value)
    assert int(setup.optimizer.iterations.numpy()) == 0

    def mean_loss(batches):
        return np.mean([float(train_step.classification_loss(y, model(x, training=True))) for x, y in batches])

    def mean_gradients(batches):
        total = []
        for x, y in batches:
            with tf.GradientTape() as tape:
                loss = train_step.classification_loss(y, model(x, training=True))
            total.append([g.numpy() for g in tape.gradient(loss, model.trainable_weights)])
        return [np.mean(parts, axis=0) for parts in zip(*total)]

    before = mean_loss(scored)
    with train_step.preserved_state(model, setup.optimizer):
        setup.optimizer.apply_gradients(zip([tf.constant(g) for g in mean_gradients(updates)], model.trainable_weights))
        after = mean_loss(scored)
    assert before - after > 0
    assert pooled.sum() == pytest.approx(before - after, rel=0.05)
