"""Training schemes, the importance probe, the step cache and the loop on a tiny model."""
from __future__ import annotations

import time

import numpy as np
import pytest
import tensorflow as tf

import models
import schemes
import selection_solver_DP as solver
import train
import train_step
from elastic_trainer import run_control, run_summary, step_timing
from elastic_trainer.command_line import UserError
from elastic_trainer.config import TrainConfig
from elastic_trainer.run_outputs import RunOutputs
from schemes import probe
from train_step import make_optimizer

TENSORS = ["conv/kernel:0", "conv/bias:0", "bn/gamma:0", "bn/beta:0", "conv2/kernel:0",
           "norm/gamma:0", "norm/beta:0", "classifier/kernel:0", "classifier/bias:0"]


def tiny_model() -> tf.keras.Model:
    inputs = tf.keras.Input((16, 16, 3))
    x = tf.keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = tf.keras.layers.BatchNormalization(name="bn")(x)
    x = tf.keras.layers.ReLU()(x)
    x = tf.keras.layers.Conv2D(6, 3, use_bias=False, name="conv2")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.LayerNormalization(name="norm")(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(3, name="classifier")(x))


def tiny_data(batches: int = 4, batch_size: int = 8, seed: int = 0) -> tf.data.Dataset:
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 255, (batches * batch_size, 16, 16, 3)).astype(np.float32)
    labels = rng.integers(0, 3, batches * batch_size)
    return tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch_size, drop_remainder=True)


def tiny_profile(model: tf.keras.Model, batch_size: int = 8) -> dict:
    """A hand-made timing table: deeper tensors cost more to reach."""
    tensors = [{"name": w.name, "shape": w.shape.as_list(), "t_dw_ms": 1.0, "t_dy_ms": 0.0 if k % 2 else 2.0}
               for k, w in enumerate(model.trainable_weights)]
    backward = sum(t["t_dw_ms"] + t["t_dy_ms"] for t in tensors)
    return {"model_name": "tiny", "input_size": 16, "num_classes": 3, "batch_size": batch_size,
            "num_iterations": 1, "tensorflow_version": tf.__version__, "device": "test", "created": "now",
            "T_fp_ms": 10.0, "T_bp_ms": backward, "T_full_ms": 10.0 + backward, "coverage": 1.0,
            "tensors": tensors}


def config(**overrides) -> TrainConfig:
    values = dict(model_name="tiny", dataset_name="tiny", train_type="full_training", input_size=16,
                  batch_size=8, num_classes=3, optimizer="sgd", learning_rate=0.05, weight_decay=5e-4,
                  num_epochs=1, run_name="test", save_model=False, save_txt=False, interval=1.0, rho=0.6,
                  weights="none", data_dir=None, seed=0, profile=None, probe_batches=1, logdir="logs",
                  recalibrate=0)
    values.update(overrides)
    return TrainConfig(**values)


def make_context(model, train_type: str, **overrides) -> schemes.Context:
    setup = make_optimizer("sgd", 0.05, 5e-4, 100)
    return schemes.Context(model, setup, config(train_type=train_type, **overrides), 4, tiny_data(),
                         tiny_profile(model), train_step.StepCache(model, setup.optimizer))


EXPECTED = {
    "full_training": TENSORS,
    "prune_training": TENSORS,
    "traditional_tl_training": ["classifier/kernel:0", "classifier/bias:0"],
    # Top k tensors of the tiny profile cost 1, 4, 5, 8 ms; rho 0.6 leaves 0.6 * 29 - 10 = 7.4 ms.
    "static_top_training": ["norm/beta:0", "classifier/kernel:0", "classifier/bias:0"],
    "tinytl_bias_training": ["conv/bias:0", "bn/beta:0", "norm/beta:0", "classifier/kernel:0", "classifier/bias:0"],
    # the last block (conv2, with the layers after it) and the classifier
    "gradient_filter_training": ["conv2/kernel:0", "norm/gamma:0", "norm/beta:0", "classifier/kernel:0",
                                 "classifier/bias:0"],
    # block 0 (conv with its BatchNorm) alone, and the classifier
    "block_range_training": ["conv/kernel:0", "conv/bias:0", "bn/gamma:0", "bn/beta:0", "classifier/kernel:0",
                             "classifier/bias:0"],
    "bn_plus_bias_training": ["conv/bias:0", "bn/gamma:0", "bn/beta:0", "norm/gamma:0", "norm/beta:0",
                              "classifier/kernel:0", "classifier/bias:0"],
}


SCHEME_FLAGS = {"gradient_filter_training": dict(gf_radius=2, gf_blocks=1), "block_range_training": dict(block_range="0:1")}


@pytest.mark.parametrize("train_type", sorted(set(schemes.SCHEMES) - {"tinytl_lite_residual_training"}))
def test_each_scheme_trains_exactly_its_tensors(train_type):
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    assert [w.name for w in model.trainable_weights] == TENSORS
    context = make_context(model, train_type, **SCHEME_FLAGS.get(train_type, {}))
    scheme = schemes.SCHEMES[train_type](context)
    context.steps.penalty = scheme.penalty
    if scheme.needs_profile:
        scheme.reselect(0)
    masks = [scheme.step_mask(step).copy() for step in range(2)]  # what the loop's two steps train
    chosen = [w.name for w, keep in zip(model.trainable_weights, np.max(masks, axis=0)) if keep]
    if train_type in EXPECTED:
        assert chosen == EXPECTED[train_type]
    else:  # elastic: the DP's choice under the profile, and it fits the budget (a rotation: on average)
        later = [scheme.step_mask(step).copy() for step in range(2, 40)]  # a rotation's mean holds over a period
        predicted = np.mean([scheme.controller.predicted_ms(mask) for mask in masks + later])
        assert chosen and predicted <= 0.6 * tiny_profile(model)["T_full_ms"]
    before = [w.numpy().copy() for w in model.trainable_weights]
    for mask, (images, labels) in zip(masks, tiny_data().take(2)):
        context.steps.get(mask)(images, labels)
    changed = [w.name for w, old in zip(model.trainable_weights, before) if not np.array_equal(w.numpy(), old)]
    assert changed == chosen


def test_block_range_covers_the_network_in_order_and_refuses_bad_ranges():
    model = tiny_model()
    head = schemes.classifier_mask(model)
    second = schemes.BlockRange(make_context(model, "block_range_training", block_range="1:2")).mask
    assert [w.name for w, keep in zip(model.trainable_weights, second & ~head) if keep] == [
        "conv2/kernel:0", "norm/gamma:0", "norm/beta:0"]
    both = schemes.BlockRange(make_context(model, "block_range_training", block_range="0:2")).mask
    assert both.all()  # the blocks together are the whole network
    with pytest.raises(UserError, match=r"--block_range 1:3 goes past the 2 blocks of .*\(0 conv, 1 conv2\)"):
        schemes.BlockRange.check(model, config(train_type="block_range_training", block_range="1:3"))
    for text in ("2:1", "1", "a:b", "-1:2", ""):
        with pytest.raises(UserError, match="--block_range must be FIRST:STOP"):
            schemes.BlockRange.check(model, config(train_type="block_range_training", block_range=text))


def test_prune_training_penalises_kernels_only():
    model = tiny_model()
    assert [v.name for v in schemes.kernels(model)] == ["conv/kernel:0", "conv2/kernel:0", "classifier/kernel:0"]
    scheme = schemes.SCHEMES["prune_training"](make_context(model, "prune_training"))
    expected = schemes.PRUNE_PENALTY * sum(float(np.abs(k.numpy()).sum()) for k in schemes.kernels(model))
    assert float(scheme.penalty()) == pytest.approx(expected, rel=1e-5)


def _state(model, optimizer):
    return [v.numpy().copy() for v in model.variables], {v.name: v.numpy().copy() for v in optimizer.variables()}


@pytest.mark.parametrize("optimizer_name", ["sgd", "adam"])
def test_probe_leaves_weights_and_optimizer_state_bit_identical(optimizer_name):
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    setup = make_optimizer(optimizer_name, 0.05, 5e-4, 100)
    step = train_step.StepCache(model, setup.optimizer).get(schemes.classifier_mask(model))
    for images, labels in tiny_data().take(3):  # momentum and iterations are non-trivial now
        step(images, labels)
    weights_before, optimizer_before = _state(model, setup.optimizer)
    probe = schemes.ImportanceProbe(model, setup.optimizer)
    batches = list(tiny_data(seed=1).take(2))
    importance = probe.loss_change(batches)
    weights_after, optimizer_after = _state(model, setup.optimizer)
    for old, new in zip(weights_before, weights_after):
        np.testing.assert_array_equal(old, new)
    # Slots the probe created for never-trained tensors are zeros, as if never created.
    assert set(optimizer_before) <= set(optimizer_after)
    for name, value in optimizer_after.items():
        np.testing.assert_array_equal(value, optimizer_before.get(name, np.zeros_like(value)))
    assert int(setup.optimizer.iterations.numpy()) == 3
    assert importance.shape == (len(TENSORS),) and np.all(np.isfinite(importance))
    assert np.any(importance != 0)
    # Deterministic given the same state and batches: the probe has no hidden side effects.
    np.testing.assert_array_equal(importance, probe.loss_change(batches))


def test_importance_is_the_first_order_loss_change():
    """sum_k I_k = -sum(g1 * dw0) is the loss drop L(w0) - L(w1) of the real update, to first
    order (L(w0) = L(w1 - dw0) ~ L(w1) - g1 . dw0)."""
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    setup = make_optimizer("sgd", 1e-5, 0.0, 100)  # a small step: first order holds
    images, labels = next(iter(tiny_data()))
    loss = lambda: float(train_step.classification_loss(labels, model(images, training=True)))  # noqa: E731
    probe = schemes.ImportanceProbe(model, setup.optimizer)
    importance = probe.loss_change([(images, labels)])
    before = loss()
    with train_step.preserved_state(model, setup.optimizer):
        setup.optimizer.apply_gradients(zip(probe._gradients(images, labels), model.trainable_weights))
        after = loss()
    assert before - after > 0
    assert importance.sum() == pytest.approx(before - after, rel=0.05)


def test_repeated_selection_reuses_its_compiled_step():
    model = tiny_model()
    cache = train_step.StepCache(model, make_optimizer("sgd", 0.01, 0, 10).optimizer, capacity=2)
    full, head = np.ones(len(TENSORS), np.uint8), schemes.classifier_mask(model)
    images, labels = next(iter(tiny_data()))
    first = cache.get(full)
    for _ in range(2):  # the first call also creates the optimizer's slots (a second trace)
        first(images, labels)
    traces = first.function.experimental_get_tracing_count()
    cache.get(head)(images, labels)
    again = cache.get(full)
    again(images, labels)
    assert again is first and first.function.experimental_get_tracing_count() == traces
    cache.get(np.roll(head, -2))  # a third selection evicts the least recently used (head)
    assert cache.get(full) is first and cache.get(head) is not None


def test_selections_share_one_traced_forward_and_train_as_a_step_traced_whole():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    images, labels = next(iter(tiny_data()))
    optimizer = make_optimizer("sgd", 0.05, 5e-4, 10).optimizer
    optimizer._create_all_weights(model.trainable_weights)
    cache = train_step.StepCache(model, optimizer)
    masks = [schemes.classifier_mask(model), np.roll(schemes.classifier_mask(model), -4), np.ones(len(TENSORS), np.uint8)]
    start = [v.numpy() for v in model.variables]
    for mask in masks:
        with train_step.preserved_state(model, optimizer):
            shared_loss = float(cache.get(mask)(images, labels)[0])
            shared = [v.numpy() for v in model.variables]
        whole = train_step.TrainStep(model, optimizer, train_step.variables_by_mask(model, mask))
        with train_step.preserved_state(model, optimizer):
            assert float(whole(images, labels)[0]) == pytest.approx(shared_loss, rel=1e-6)
            for a, b, before in zip(shared, [v.numpy() for v in model.variables], start):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
        selected = train_step.variables_by_mask(model, mask)
        for variable, after, before in zip(model.variables, shared, start):  # exactly the selection trained
            if any(variable is w for w in model.trainable_weights):
                assert (not np.array_equal(after, before)) == any(variable is w for w in selected), variable.name
    assert cache.forward.experimental_get_tracing_count() == 1  # the model was traced once for three steps


@pytest.mark.slow
def test_evicted_steps_free_their_graphs():
    """Re-selection must not leak: a compiled step dropped from the cache frees its graph."""
    import gc

    from tensorflow.python.framework import func_graph

    def step_graphs():
        gc.collect()
        return [g for g in gc.get_objects() if isinstance(g, func_graph.FuncGraph) and g.name.startswith("_step")]

    earlier = {id(g) for g in step_graphs()}  # kept by other tests (tf.custom_gradient keeps its graph)
    model = tiny_model()
    cache = train_step.StepCache(model, make_optimizer("sgd", 0.01, 5e-4, 10).optimizer, capacity=1)
    images, labels = next(iter(tiny_data()))
    for deepest in range(len(TENSORS) - 2, 0, -2):
        mask = np.zeros(len(TENSORS), np.uint8)
        mask[deepest:] = 1
        cache.get(mask)(images, labels)
    graphs = [g for g in step_graphs() if id(g) not in earlier]
    assert len(graphs) <= 2  # the one cached step (traced once to create slots, once after)


def test_controller_closes_the_loop():
    model = tiny_model()
    profile = tiny_profile(model)
    controller = schemes.StepTimeController(profile, rho=0.7)
    importance = np.ones(len(TENSORS))
    mask = controller.select(importance)
    predicted = controller.predicted_ms(mask)
    assert predicted <= controller.target_ms
    for _ in range(10):  # steps run 30% slower than predicted
        controller.observe(1.3 * predicted)
    info = controller.end_period(mask)
    assert info["elastic/target_vs_achieved"] == pytest.approx(1.3 * predicted / controller.target_ms)
    assert controller.correction == pytest.approx(1.3)
    corrected = controller.select(importance)
    assert 1.3 * controller.predicted_ms(corrected) <= controller.target_ms + 1e-9
    assert corrected.sum() < mask.sum()
    with pytest.raises(UserError, match="smallest feasible rho for this profile is"):
        schemes.StepTimeController(profile, rho=0.3)
    for _ in range(10):  # a machine 3x slower than the profile: even one tensor overshoots
        controller.observe(3 * controller.predicted_ms(corrected))
    controller.end_period(corrected)
    assert controller.select(importance).sum() == 1  # the cheapest tensor alone, never nothing


def test_a_machine_uniformly_faster_than_its_profile_keeps_rho_of_todays_full_step():
    model = tiny_model()
    profile = tiny_profile(model)
    importance = np.linspace(1.0, 2.0, len(TENSORS))
    fresh = schemes.StepTimeController(profile, rho=0.7)
    wanted = fresh.select(importance)
    stale = schemes.StepTimeController(profile, rho=0.7)  # everything runs at 0.8 of the profile's times
    for _ in range(10):
        stale.observe(0.8 * stale.predicted_ms(wanted))
    stale.end_period(wanted)
    assert stale.correction == pytest.approx(0.8)
    uncorrected = stale.select(importance)  # the loop alone aims at 0.7 of the *profiled* full step
    assert stale.predicted_ms(uncorrected) > fresh.target_ms
    assert stale.set_drift(0.8) == pytest.approx(0.8)  # a full-gradient pass timed at 0.8 of the profile's
    assert stale.target_ms == pytest.approx(0.7 * 0.8 * profile["T_full_ms"])
    np.testing.assert_array_equal(stale.select(importance), wanted)  # rho of today's full step again
    assert stale.set_drift(1.0) == pytest.approx(0.9)  # later anchors are averaged in
    assert stale.set_drift(float("nan")) == pytest.approx(0.9)  # a failed timing changes nothing
    restored = schemes.StepTimeController(profile, rho=0.7)
    restored.load_state(stale.state())
    assert restored.drift == pytest.approx(0.9) and restored.set_drift(0.5) == pytest.approx(0.7)


@pytest.mark.parametrize("rho_mode, profiled, anchored", [("exact", True, True), ("paper", True, False),
                                                          ("exact", False, False)])
def test_elastic_reanchors_on_the_probes_gradients_from_its_second_selection(rho_mode, profiled, anchored):
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    context = make_context(model, "elastic_training", rho=0.9, rho_mode=rho_mode)
    if profiled:
        context.profile["T_grad_ms"] = 1e6  # far slower than anything here: drift well below 1
    scheme = schemes.ElasticTraining(context)
    first = scheme.reselect(0)
    assert "elastic/drift" not in first and scheme.controller.drift == 1.0  # a new process runs slow
    before = [v.numpy().copy() for v in model.variables]
    second = scheme.reselect(4)  # no period measured: the probe's own gradient calls alone
    assert ("elastic/drift" in second) == anchored
    if anchored:
        assert 0 < second["elastic/drift"] < 0.01 and scheme.controller.drift == second["elastic/drift"]
    for old, variable in zip(before, model.variables):  # timing the gradients trains nothing
        np.testing.assert_array_equal(old, variable.numpy())


def selected_once():
    """An exact-mode ElasticTraining (profile with T_grad_ms 40) after its first selection."""
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    context = make_context(model, "elastic_training", rho=0.9, rho_mode="exact")
    context.profile["T_grad_ms"] = 40.0
    scheme = schemes.ElasticTraining(context)
    scheme.reselect(0)
    return model, context, scheme


def test_the_live_anchor_never_times_a_compiling_call_nor_a_resumed_process_s_first_selection():
    _, context, scheme = selected_once()
    assert len(scheme.probe.calls_ms) == 2 - 1  # of its two gradient calls, the first compiled
    resumed = schemes.ElasticTraining(context)  # a new process: a new probe function, state restored
    resumed.load_state(scheme.state())
    assert resumed.selections == 1
    first = resumed.reselect(4)
    assert "elastic/drift" not in first and resumed.controller.drift == 1.0
    assert "elastic/drift" in resumed.reselect(8)  # from its second selection on


@pytest.mark.parametrize("chunks_timed", [False, True])
def test_a_micro_batched_probe_anchors_on_its_own_profiled_pass_never_on_a_whole_batch(chunks_timed):
    """Under a memory budget the probe runs in micro-batches, and a whole-batch gradient pass
    would break the budget: there is none. A profile that timed the micro-batched pass
    (T_grad_chunks_ms) lets the live anchor read the machine from the probe's own calls; an older
    one leaves the target where it was."""
    model, context, scheme = selected_once()
    if chunks_timed:
        context.profile["T_grad_chunks_ms"] = {"2": 60.0, "4": 90.0}
    scheme.probe.chunks = 2  # as a memory budget sets it
    images, labels = next(iter(tiny_data()))
    context.steps.get(scheme.mask)(images, labels)  # the period's step is compiled and cached
    for _ in range(5):
        scheme.observe_step(30.0)
    whole, real = [], scheme.probe._full_gradients
    scheme.probe._full_gradients = lambda *batch: whole.append(1) or real(*batch)
    before = [v.numpy().copy() for v in model.variables]
    info = scheme.reselect(4)
    assert whole == [] and scheme.probe._chunk_gradients.experimental_get_tracing_count() == 1
    if chunks_timed:
        assert info["elastic/drift_measured"] > 0 and len(scheme.probe.calls_ms) == 0  # read, then cleared
    else:
        assert "elastic/drift_measured" not in info and scheme.controller.drift == 1.0
    for old, variable in zip(before, model.variables):  # probing trained nothing
        np.testing.assert_array_equal(old, variable.numpy())
    scheme.probe.chunks = 1  # in one piece again: the anchor reads the machine
    scheme.probe._full_gradients = real
    for _ in range(5):
        scheme.observe_step(30.0)
    assert "elastic/drift_measured" in scheme.reselect(8)


def test_the_micro_batched_pass_s_profiled_time_is_interpolated_between_the_counts_timed():
    table = {"2": 60.0, "4": 90.0, "8": 170.0}
    assert probe.chunked_time_ms(table, 3) == pytest.approx(75.0)
    assert probe.chunked_time_ms(table, 8) == 170.0
    assert probe.chunked_time_ms(table, 16) is None and probe.chunked_time_ms({}, 2) is None


def test_micro_batched_gradients_are_the_batch_s_with_frozen_batchnorm():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()  # LayerNormalization and an inference-mode BatchNorm: examples do not interact
    forward = lambda images: model(images, training=False)  # noqa: E731
    images, labels = next(iter(tiny_data()))
    whole = train_step.full_gradients(model, forward)(images, labels)
    function = probe.free_batch_gradients(model, forward, images, labels)
    for chunks in (2, 3, 8):
        for a, b in zip(whole, probe.micro_batched_gradients(function, images, labels, chunks)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


def test_the_live_anchor_reads_the_period_s_speed_through_a_burst_proof_ratio(monkeypatch):
    model, context, scheme = selected_once()
    images, labels = next(iter(tiny_data()))
    context.steps.get(scheme.mask)(images, labels)  # the period's step is compiled and cached
    for _ in range(5):
        scheme.observe_step(30.0)  # the period ran its steps in 30 ms
    before = [v.numpy().copy() for v in model.variables]
    counted, real = [], scheme.probe._full_gradients

    class Counted:  # the probe's tf.function, its calls counted
        def __call__(self, *batch):
            counted.append(1)
            return real(*batch)

        def experimental_get_tracing_count(self):
            return real.experimental_get_tracing_count()

    scheme.probe._full_gradients = Counted()
    scheme.probe.loss_change([(images, labels)])
    assert len(counted) == 2  # one gradient call before the probe's update, one after
    live = scheme.probe.gradients_ms(context.steps.get(scheme.mask))
    assert len(live) == 2 and min(live) > 0 and len(counted) == 2  # the probe's own calls, timed
    assert len(scheme.probe.gradients_ms()) == 1 and len(counted) == 4  # used up: timed anew
    scheme.probe._full_gradients = real
    for old, variable in zip(before, model.variables):  # timing the step alongside trains nothing
        np.testing.assert_array_equal(old, variable.numpy())
    timed = []

    def gradients_ms(step=None, calls=2):
        timed.append(step)
        return [60.0, 45.0] if step is not None else [60.0]  # a burst: both timed 1.5x slow

    monkeypatch.setattr(scheme.probe, "gradients_ms", gradients_ms)
    period_step = context.steps.get(scheme.mask)
    info = scheme.reselect(4)
    assert timed == [period_step]  # the probe's gradients against the step the period ran
    # the gradients run as fast as the period's steps suggest: 60 * 30 / 45 = 40 ms, the profile's
    assert info["elastic/drift"] == pytest.approx(1.0)


@pytest.mark.parametrize("eval_every", [1, 3])  # 3: epoch 1 is not evaluated, and its weights are kept still
def test_training_stops_on_nan_and_keeps_the_last_good_checkpoint(tmp_path, eval_every):
    model = tiny_model()
    calls = {"count": 0}

    def batches():
        calls["count"] += 1
        for images, labels in tiny_data():
            poisoned = images * np.nan if calls["count"] > 1 else images  # second epoch diverges
            yield poisoned, labels

    spec = (tf.TensorSpec((8, 16, 16, 3), tf.float32), tf.TensorSpec((8,), tf.int64))
    data = tf.data.Dataset.from_generator(batches, output_signature=spec)
    outputs = RunOutputs(str(tmp_path), "nan_run", "tiny", 3, 16)
    with pytest.raises(run_control.TrainingDiverged, match=r"loss became nan at step 5 \(epoch 2\).*last good"):
        train.train(config(num_epochs=3, logdir=str(tmp_path), eval_every=eval_every), model, data, tiny_data(), 4,
                    outputs)
    assert (tmp_path / "nan_run" / "last_good.h5").exists()
    kept = tiny_model()
    kept.load_weights(str(tmp_path / "nan_run" / "last_good.h5"))
    assert all(np.all(np.isfinite(w)) for w in kept.get_weights())  # epoch 1's, not the NaN ones


@pytest.mark.parametrize("seconds, written", [(0.0, [8, 12]), (3600.0, [])])
def test_epoch_ends_write_a_checkpoint_only_when_checkpoint_seconds_have_passed(tmp_path, seconds, written):
    from elastic_trainer import checkpoints

    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    train.train(config(num_epochs=3, logdir=str(tmp_path), checkpoint_seconds=seconds), tiny_model(), tiny_data(),
                tiny_data(), 4, outputs)
    paths = checkpoints.checkpoint_paths(checkpoints.checkpoint_dir(outputs.run_dir))
    assert sorted(int(path.rsplit("-", 1)[1]) for path in paths) == written  # the newest two kept


def test_paper_rho_mode_selects_within_the_originals_budget_and_keeps_the_loop_open():
    model = tiny_model()
    profile = tiny_profile(model)  # 19 ms of backward pass, T_fp 10, T_full 29
    controller = schemes.StepTimeController(profile, rho=0.6, rho_mode="paper")
    disco = solver.paper_disco(controller.t_dy, controller.t_dw)
    assert controller.budget_ms() == pytest.approx((0.6 - 1 / 3) * 1.5 * disco * 19)
    mask = controller.select(np.ones(len(TENSORS)))
    assert controller.predicted_ms(mask) - 10 <= controller.budget_ms()
    for _ in range(10):
        controller.observe(2 * controller.predicted_ms(mask))
    controller.end_period(mask)
    assert controller.correction == 1.0  # the original has no closed loop


def test_summary_counts_compile_time_and_measures_a_live_full_step(tmp_path):
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    run_config = config(train_type="elastic_training", num_epochs=2, logdir=str(tmp_path), reference_steps=4)
    summary = train.train(run_config, model, tiny_data(), tiny_data(), 4, outputs, tiny_profile(model))
    assert summary["compile_seconds"] > 0 and 0 < summary["compile_share"] < 1
    assert summary["reference_full_step_ms"] > 0 and summary["reference_selection_step_ms"] > 0
    assert summary["step_time_ratio_live"] == pytest.approx(
        summary["reference_selection_step_ms"] / summary["reference_full_step_ms"])
    assert [entry["epoch"] for entry in summary["history"]] == [1, 2]
    assert summary["history"][-1]["train_seconds"] == pytest.approx(summary["train_seconds"])
    share = summary["host_steal_share"]  # the host's share of the CPU while it trained (None off Linux)
    assert share is None or 0 <= share <= 1
    assert summary["evaluation_seconds"] > 0


def test_the_test_set_sees_the_final_and_the_validation_best_weights_once_at_the_end(tmp_path):
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    loop = train.Loop(config(logdir=str(tmp_path)), model, tiny_data(), 4, outputs, None, "")
    evaluate = train.make_evaluator(model)
    test_data = tiny_data(seed=1)
    classifier_bias = model.get_layer("classifier").bias
    classifier_bias.assign([0.0, 100.0, 0.0])  # epoch 1's weights, the validation-best: always class 1
    outputs.save_best_validation(1, model.get_weights())  # as a resumed run finds them (this one's memory: none)
    at_best = evaluate(test_data)["test/accuracy"]
    classifier_bias.assign([100.0, 0.0, 0.0])  # the final weights: always class 0
    final_weights = [variable.numpy() for variable in model.variables]
    final = evaluate(test_data)["test/accuracy"]
    assert final != at_best
    loop.state.history = [{"epoch": 1, "val_accuracy": 0.9}, {"epoch": 2, "val_accuracy": 0.5}]
    loop.evaluations.final(loop.state, loop.memory, test_data)
    final_test = loop.evaluations.final_test
    assert final_test["final_test_accuracy"] == final and final_test["test_accuracy_at_best_val"] == at_best
    for variable, kept in zip(model.variables, final_weights):  # the final weights are back
        np.testing.assert_array_equal(variable.numpy(), kept)
    summary = loop.summary()
    assert summary["final_test_accuracy"] == final and summary["test_accuracy_at_best_val"] == at_best
    assert summary["best_test_accuracy"] is None and summary["best_val_epoch"] == 1


def counted_evaluations(monkeypatch) -> list:
    """The loop's evaluations, one entry (the split's prefix: "test", "validation") each, as they come."""
    evaluated = []
    make_evaluator = train.make_evaluator

    def counting(model):
        evaluate = make_evaluator(model)
        return lambda dataset, prefix="test": evaluated.append(prefix) or evaluate(dataset, prefix)

    monkeypatch.setattr(train, "make_evaluator", counting)
    return evaluated


@pytest.mark.parametrize("every_epoch", [False, True])
def test_epochs_are_validated_and_tested_only_at_the_end_unless_asked(tmp_path, monkeypatch, every_epoch):
    evaluated = counted_evaluations(monkeypatch)
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    summary = train.train(config(num_epochs=3, logdir=str(tmp_path), test_every_epoch=every_epoch), model,
                          tiny_data(), tiny_data(seed=1), 4, outputs, val_data=tiny_data(seed=2))
    assert evaluated.count("validation") == 3 and summary["test_every_epoch"] is every_epoch
    if every_epoch:
        assert evaluated.count("test") == 3 and "final_test_seconds" not in summary
    else:  # the final weights, and the validation-best epoch's unless it is the last
        assert evaluated.count("test") == (1 if summary["best_val_epoch"] == 3 else 2)
        assert evaluated[-1] == "test" and summary["final_test_seconds"] > 0


def accuracy_steps(run_dir: str, split: str):
    """The steps of a run's `split` accuracy scalars, read back from its TensorBoard events."""
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0})
    accumulator.Reload()
    tags = accumulator.Tags()["tensors"]
    return [event.step for event in accumulator.Tensors(f"accuracy/{split}")] if f"accuracy/{split}" in tags else []


@pytest.mark.parametrize("epochs, every, evaluated, every_epoch", [(5, 3, [3, 5], False), (4, 3, [3, 4], True),
                                                                   (6, 3, [3, 6], False), (2, 1, [1, 2], False)])
def test_eval_every_evaluates_every_nth_epoch_and_always_the_last(tmp_path, monkeypatch, epochs, every, evaluated,
                                                                  every_epoch):
    calls = counted_evaluations(monkeypatch)
    tf.keras.utils.set_random_seed(0)
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    summary = train.train(config(num_epochs=epochs, eval_every=every, logdir=str(tmp_path),
                                 test_every_epoch=every_epoch), tiny_model(), tiny_data(), tiny_data(seed=1), 4,
                          outputs, val_data=tiny_data(seed=2))
    outputs.writer.flush()
    assert calls.count("validation") == len(evaluated)
    assert accuracy_steps(outputs.run_dir, "validation") == [4 * epoch for epoch in evaluated]  # 4 steps an epoch
    assert len(accuracy_steps(outputs.run_dir, "train")) == epochs  # every epoch still has its training scalars
    history = summary["history"]
    assert [entry["epoch"] for entry in history if "val_accuracy" in entry] == evaluated
    assert [entry["epoch"] for entry in history if entry.get("evaluated") is False] == \
        [epoch for epoch in range(1, epochs + 1) if epoch not in evaluated]  # said, not left to guess
    assert summary["best_val_epoch"] in evaluated
    if every_epoch:  # the test set at the same epochs, and the best over them
        assert accuracy_steps(outputs.run_dir, "test") == [4 * epoch for epoch in evaluated]
        tested = [entry["test_accuracy"] for entry in history if "test_accuracy" in entry]
        assert len(tested) == len(evaluated) and summary["best_test_accuracy"] == max(tested)
        assert summary["final_test_accuracy"] == history[-1]["test_accuracy"]
    else:  # the final weights, and the validation-best (evaluated) epoch's unless it is the last
        assert calls.count("test") == (1 if summary["best_val_epoch"] == epochs else 2)


class SlowStart:
    """tiny_data's batches, the first of epoch `epoch` (0-based) served `seconds` late (as a large
    shuffle buffer filling): the deadline ends the run there, before the epoch's first step."""

    def __init__(self, epoch: int, seconds: float):
        import data

        self.slow, self.seconds, self.dataset = epoch, seconds, tiny_data()
        self._probes = data.FixedEpochs(self.dataset)

    def epoch(self, index, skip=0):
        for position, batch in enumerate(self.dataset.skip(skip), start=skip):
            if index == self.slow and position == 0:
                time.sleep(self.seconds)
            yield batch

    def probe(self, start, batches):
        return self._probes.probe(start, batches)


@pytest.mark.slow
def test_a_deadline_that_comes_with_an_epoch_s_start_still_has_its_last_epoch_evaluated(tmp_path):
    """The end of epoch 2 cannot know it is the last: the run's clock runs out while epoch 3 waits for
    its first batch. --eval_every 5 skipped epoch 2 there, so it is evaluated after the loop."""
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    budget = 4.0  # 8 tiny steps and their compile take well under a second
    summary = train.train(config(num_epochs=1, eval_every=5, time_budget=budget, logdir=str(tmp_path)), model,
                          SlowStart(2, budget), tiny_data(seed=1), 4, outputs, tiny_profile(model),
                          val_data=tiny_data(seed=2))
    outputs.writer.flush()
    assert summary["deadline"]["steps"] == 8 and summary["deadline"]["plan"][-1] == [8, 8], summary["deadline"]
    assert [entry["epoch"] for entry in summary["history"]] == [1, 2]
    assert "val_accuracy" not in summary["history"][0] and summary["history"][0]["evaluated"] is False
    assert "val_accuracy" in summary["history"][1] and "evaluated" not in summary["history"][1]
    assert accuracy_steps(outputs.run_dir, "validation") == [8]
    assert summary["best_val_epoch"] == 2 and summary["test_accuracy_at_best_val"] == summary["final_test_accuracy"]


@pytest.mark.slow
def test_summary_counts_a_slow_compile_and_splits_the_selection_overhead(tmp_path, monkeypatch, capsys):
    """Tracing made 0.3 s slower: each selection's first step carries it into compile_seconds."""
    traced = []
    original = train_step.TrainStep._step

    def slow_trace(self, images, labels):  # Python runs only while tracing
        traced.append(self)
        time.sleep(0.3)
        return original(self, images, labels)

    monkeypatch.setattr(train_step.TrainStep, "_step", slow_trace)
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    run_config = config(train_type="elastic_training", num_epochs=2, logdir=str(tmp_path), reference_steps=0)
    summary = train.train(run_config, model, tiny_data(), tiny_data(), 4, outputs, tiny_profile(model))
    assert traced  # every trace happened inside the loop, on a selection's first step
    assert summary["compile_seconds"] >= 0.3 * len(traced) - 0.05
    parts = summary["selection_parts"]
    assert parts["probe"] > 0 and parts["dp"] > 0 and parts["recalibrate"] == 0
    assert parts["probe"] + parts["dp"] <= sum(summary["selection_seconds"])
    share = (summary["compile_seconds"] + sum(summary["selection_seconds"])) / summary["train_seconds"]
    assert summary["overhead_share"] == pytest.approx(share)
    from elastic_trainer import run_summary

    for written in (summary, {k: v for k, v in summary.items() if k != "overhead_share"}):  # older summaries too
        run_summary.report(written, None)
        printed = capsys.readouterr().out
        assert f"together {100 * share:.1f} %" in printed
        assert ("a longer --interval" in printed) == (share > run_summary.OVERHEAD_HINT_SHARE)
    run_summary.report(dict(summary, train_seconds=1e6, overhead_share=1e-5), None)  # a long run: no hint
    assert "a longer --interval" not in capsys.readouterr().out


def test_live_reference_leaves_weights_and_optimizer_state_untouched():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    setup = make_optimizer("sgd", 0.05, 5e-4, 100)
    cache = train_step.StepCache(model, setup.optimizer)
    head = schemes.classifier_mask(model)
    batch = next(iter(tiny_data()))
    for _ in range(3):
        cache.get(head)(*batch)
    weights_before, optimizer_before = _state(model, setup.optimizer)
    reference = step_timing.measure_reference(cache, setup.optimizer, head, batch, 3)
    assert reference["reference_full_step_ms"] > 0 and reference["reference_seconds"] > 0
    weights_after, optimizer_after = _state(model, setup.optimizer)
    for old, new in zip(weights_before, weights_after):
        np.testing.assert_array_equal(old, new)
    for name, value in optimizer_after.items():  # slots the full step created are zeros
        np.testing.assert_array_equal(value, optimizer_before.get(name, np.zeros_like(value)))
    assert int(setup.optimizer.iterations.numpy()) == 3


def test_static_top_and_paper_selection_use_the_originals_floored_units():
    """Tensors under 1/1000 of the backward time cost nothing in the original's units: the
    paper mode lets them in for free, as the original does."""
    model = tiny_model()
    profile = tiny_profile(model)
    for k, tensor in enumerate(profile["tensors"]):  # the two classifier tensors: 0.01 ms each
        if k >= 7:
            tensor["t_dw_ms"], tensor["t_dy_ms"] = 0.01, 0.0
    controller = schemes.StepTimeController(profile, rho=0.5, rho_mode="paper")
    t_dy_q, t_dw_q, budget = solver.paper_problem(controller.t_dy, controller.t_dw, 0.5)
    assert list(t_dw_q[:2]) == [0, 0] and budget >= 0
    chosen = controller.select(np.ones(len(TENSORS)))
    top = controller.static_top()
    assert chosen[-2:].all() and top[-2:].all()
    assert solver.backward_time(t_dy_q, t_dw_q, top[::-1]) <= budget
    deeper = np.zeros(len(TENSORS), np.uint8)
    deeper[-(int(top.sum()) + 1):] = 1  # one more tensor no longer fits
    assert solver.backward_time(t_dy_q, t_dw_q, deeper[::-1]) > budget


def test_sparse_update_selects_once_by_contribution_and_deterministically():
    results = []
    for _ in range(2):
        tf.keras.utils.set_random_seed(0)
        model = tiny_model()
        context = make_context(model, "sparse_update_training")
        scheme = schemes.SCHEMES["sparse_update_training"](context)
        before = [w.numpy().copy() for w in model.variables]
        assert scheme.due(0)
        scheme.reselect(0)
        assert not scheme.due(1)  # static: selected once, before training
        for old, new in zip(before, model.variables):  # the trials leave no trace
            np.testing.assert_array_equal(old, new.numpy())
        results.append((scheme.mask.copy(), scheme.contributions))
    assert np.array_equal(results[0][0], results[1][0]) and results[0][1] == results[1][1]
    contributions = results[0][1]
    # tiny_model's blocks: conv (+bn) and conv2 (+norm); bias trials over the last 1 and 2 blocks
    assert len(contributions["weights"]) == 2 and contributions["bias_depths"] == [1, 2]
    assert any(abs(value) > 0 for value in contributions["weights"] + contributions["biases"])
    assert results[0][0][-2:].all()  # the classifier trains


def test_model_selection_takes_the_first_epoch_of_best_validation_accuracy():
    history = [{"epoch": 1, "test_accuracy": 0.5, "val_accuracy": 0.4},
               {"epoch": 2, "test_accuracy": 0.7, "val_accuracy": 0.6},
               {"epoch": 3, "test_accuracy": 0.9, "val_accuracy": 0.6},
               {"epoch": 4, "test_accuracy": 0.8, "val_accuracy": 0.5}]
    assert run_summary.selected_epoch(history) == {"best_val_epoch": 2, "best_val_accuracy": 0.6,
                                             "test_accuracy_at_best_val": 0.7}
    without = [{key: value for key, value in entry.items() if key != "val_accuracy"} for entry in history]
    assert run_summary.selected_epoch(without) == {"best_val_epoch": None, "best_val_accuracy": None,
                                             "test_accuracy_at_best_val": None}


@pytest.mark.parametrize("sorted_order", [True, False])
def test_the_loop_reports_the_first_batches_classes_and_warns_on_a_class_sorted_order(tmp_path, caplog, sorted_order):
    """Issue 53's guard: a class-sorted pipeline cannot reach training unnoticed."""
    shuffled = tiny_data()
    one_class = shuffled.map(lambda images, labels: (images, tf.zeros_like(labels)))  # as a sorted split's start
    outputs = RunOutputs(str(tmp_path), "mix", "tiny", 3, 16)
    with caplog.at_level("INFO"):
        train.train(config(logdir=str(tmp_path)), tiny_model(), one_class if sorted_order else shuffled, tiny_data(),
                    4, outputs)
    said = [record for record in caplog.records if "training batches (32 examples) hold" in record.getMessage()]
    assert len(said) == 1  # once, at the start
    assert ("looks class-sorted" in said[0].getMessage()) == sorted_order
    assert said[0].levelname == ("WARNING" if sorted_order else "INFO")
