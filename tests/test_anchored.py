"""anchored_window_training: one held-out look names a stage; every window starts there and spends up."""
from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

import schemes
import selection_solver_DP as solver
from models.batchnorm import recalibrate_batchnorm
from schemes.anchored import (KEEP_SHARE, OPEN_EXACT_SHARE, SPEND_SHARE, WHOLE_STAGE_SHARE, RotatingAnchoredTraining,
                              ThriftyAnchoredTraining, anchor_of, reach_from, stage_sums, still_spends, thrifty_ratio)
from schemes.heldout import HELD_OUT_BUFFER
from schemes.time_budget import StepTimeController
from schemes.window import block_of_tensors
from test_train import make_context, tiny_data, tiny_model


def looking_context(model, train_type: str, **overrides):
    """A context of three periods (4 steps an epoch, 3 epochs, a selection every epoch) with a
    validation split for the look's held-out batches."""
    context = make_context(model, train_type, num_epochs=3, interval=1.0, **overrides)
    context.validation = tiny_data(batches=4, seed=7)
    return context


def test_the_scheme_looks_once_with_the_runs_probe_batches_and_refits_the_window():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    # 4 steps an epoch, 3 epochs, a selection every epoch: three periods, so the look spends 3 probe batches
    context = looking_context(model, "anchored_window_training", rho=0.85)
    scheme = schemes.SCHEMES["anchored_window_training"](context)
    info = scheme.reselect(0)
    assert scheme.periods == 3 and scheme.probe_position == 3 and scheme.held_out_position == 3
    first, stop = scheme.stages[scheme.anchor]
    assert (info["anchor/first_block"], info["anchor/stop_block"]) == (first, stop)
    assert scheme.anchor == anchor_of(stage_sums(scheme.look, block_of_tensors(model), scheme.stages))
    block_of = block_of_tensors(model)
    chosen = scheme.mask.astype(bool)
    assert chosen[scheme._head == 1].all() and not (chosen & (block_of >= 0) & (block_of < first)).any()
    assert scheme.controller.predicted_ms(scheme.mask) <= 0.85 * scheme.controller.T_full_ms + 1e-6
    looked = scheme.look.copy()
    scheme.reselect(4)  # no second look: the probe streams stay where they were
    assert scheme.probe_position == 3 and scheme.held_out_position == 3 and (scheme.look == looked).all()
    again = schemes.SCHEMES["anchored_window_training"](context)  # a resumed run keeps its anchor
    again.load_state(scheme.state())
    again.reselect(8)
    assert again.anchor == scheme.anchor and again.probe_position == 3 and again.selections == 3
    assert not schemes.SCHEMES["anchored_window_training"].accepts_memory_budget


def _nested_model() -> tf.keras.Model:
    """A registry-like model: preprocessing, then a nested backbone with two BatchNorm layers."""
    image = tf.keras.Input((8, 8, 3))
    x = tf.keras.layers.Conv2D(4, 3, name="c1")(image)
    x = tf.keras.layers.BatchNormalization(name="n1")(x)
    x = tf.keras.layers.ReLU()(x)
    x = tf.keras.layers.Conv2D(5, 3, name="c2")(x)
    backbone = tf.keras.Model(image, tf.keras.layers.BatchNormalization(name="n2")(x), name="backbone")
    inputs = tf.keras.Input((8, 8, 3))
    x = backbone(tf.keras.layers.Rescaling(1 / 127.5, offset=-1.0)(inputs), training=False)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(3, name="classifier")(x))


def test_recalibrated_statistics_are_the_target_images_own():
    tf.keras.utils.set_random_seed(0)
    model = _nested_model()
    rng = np.random.default_rng(1)
    batches = [(rng.uniform(0, 255, (size, 8, 8, 3)).astype(np.float32), np.zeros(size)) for size in (6, 3)]
    trainable = [w.numpy().copy() for w in model.trainable_weights]
    assert recalibrate_batchnorm(model, batches) == 2
    backbone = model.get_layer("backbone")
    n1, n2 = backbone.get_layer("n1"), backbone.get_layer("n2")
    statistics = [(layer.moving_mean.numpy(), layer.moving_variance.numpy()) for layer in (n1, n2)]
    images = [images / 127.5 - 1.0 for images, _ in batches]
    # n1: its input over all images; n2: its input with n1 normalising each batch by that batch's statistics
    first = np.concatenate([backbone.get_layer("c1")(x).numpy() for x in images]).reshape(-1, 4)
    below = tf.keras.Model(backbone.inputs, n2.input)
    second = np.concatenate([below(x, training=True).numpy() for x in images]).reshape(-1, 5)
    for (mean, variance), features in zip(statistics, (first, second)):  # (training mode moved them since)
        assert np.allclose(mean, features.mean(0), atol=1e-6)
        assert np.allclose(variance, features.var(0), rtol=1e-4, atol=1e-6)
    assert all((w.numpy() == before).all() for w, before in zip(model.trainable_weights, trainable))
    assert recalibrate_batchnorm(tiny_model(), []) == 0  # nothing to measure on: nothing set


def test_the_adapted_scheme_recalibrates_once_on_the_looks_batches_before_looking():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    context = looking_context(model, "adapted_anchored_training", rho=0.85)
    bn = model.get_layer("bn")
    assert np.allclose(bn.moving_mean.numpy(), 0) and np.allclose(bn.moving_variance.numpy(), 1)
    scheme = schemes.SCHEMES["adapted_anchored_training"](context)
    scheme.reselect(0)
    adapted = bn.moving_mean.numpy().copy(), bn.moving_variance.numpy().copy()
    assert scheme.probe_position == 3 and scheme.overhead["adapt"] > 0
    twin = tiny_model()  # the same statistics, measured directly on the first three probe batches
    twin.set_weights(model.get_weights())  # (the look restores the weights its probe updated)
    recalibrate_batchnorm(twin, context.train_data.probe(0, 3))
    assert np.allclose(adapted[0], twin.get_layer("bn").moving_mean.numpy(), atol=1e-5)
    assert np.allclose(adapted[1], twin.get_layer("bn").moving_variance.numpy(), rtol=1e-4)
    assert not np.allclose(adapted[1], 1)
    bn.moving_mean.assign(np.full(4, 7.0, np.float32))  # a later selection, or a resumed run, does not adapt again
    scheme.reselect(4)
    again = schemes.SCHEMES["adapted_anchored_training"](context)
    again.load_state(scheme.state())
    again.reselect(8)
    assert np.allclose(bn.moving_mean.numpy(), 7.0) and again.anchor == scheme.anchor


def test_main_help_names_exactly_the_candidate_selectors():
    import main

    text = " ".join(main.build_parser().format_help().split())
    listed = text.split("tried against the best fixed choice at a budget (")[1].split(";")[0].split(", ")
    assert listed == [name for name, scheme in schemes.SCHEMES.items() if scheme.candidate]
    assert {"elastic_heldout_training", "depth_schedule_training", "anchored_window_training",
            "adapted_anchored_training"} <= set(listed) and "elastic_training" not in listed


@pytest.mark.parametrize("train_type", ["anchored_window_training", "nearest_anchored_training"])
def test_in_paper_mode_only_the_looped_scheme_holds_the_budgets_predicted_step(train_type):
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    context = looking_context(model, train_type, rho=0.8, rho_mode="paper")
    paper = StepTimeController(context.profile, 0.8, rho_mode="paper")
    scheme = schemes.SCHEMES[train_type](context)
    looped = train_type == "nearest_anchored_training"
    assert scheme.controller.rho_mode == ("exact" if looped else "paper")
    # before any measured step both budget the paper's backward share; the looped one as a step time
    assert math.isclose(scheme.controller.budget_ms(), paper.budget_ms())
    scheme.reselect(0)
    for _ in range(6):  # steps run 15 % under their prediction
        scheme.observe_step(0.85 * scheme.controller.predicted_ms(scheme.mask))
    scheme.reselect(4)
    if looped:  # the budget grows until measured steps take what the paper's budget predicts
        assert scheme.controller.correction == pytest.approx(0.85)
        assert scheme.controller.budget_ms() > paper.budget_ms()
        again = schemes.SCHEMES[train_type](context)  # a resumed run keeps the loop's state
        again.load_state(scheme.state())
        assert again.controller.correction == pytest.approx(0.85) and again.controller.rho_mode == "exact"
    else:  # the original's open loop
        assert scheme.controller.correction == 1.0 and scheme.controller.budget_ms() == paper.budget_ms()


def test_the_filled_scheme_adds_to_the_eighths_window_within_the_budget():
    tf.keras.utils.set_random_seed(0)
    masks = {}
    for train_type in ("nearest_anchored_training", "filled_anchored_training"):
        model = tiny_model()
        model.set_weights(masks.get("weights", model.get_weights()))
        masks["weights"] = model.get_weights()
        context = looking_context(model, train_type, rho=0.85)
        scheme = schemes.SCHEMES[train_type](context)
        scheme.reselect(0)
        masks[train_type] = scheme.mask.astype(bool)
        assert scheme.controller.predicted_ms(scheme.mask) <= 0.85 * scheme.controller.T_full_ms + 1e-6
    assert (masks["filled_anchored_training"] >= masks["nearest_anchored_training"]).all()


def test_a_selection_still_spends_when_it_fits_and_uses_the_share():
    assert still_spends(95.0, 100.0, 0.95) and still_spends(100.0, 100.0, 0.95)
    assert not still_spends(94.9, 100.0, 0.95) and not still_spends(100.1, 100.0, 0.95)


@pytest.mark.parametrize("train_type", ["filled_anchored_training", "steady_anchored_training"])
def test_in_paper_mode_the_steady_scheme_times_no_drift_and_keeps_a_selection_that_still_spends(train_type):
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    context = looking_context(model, train_type, rho=0.6, rho_mode="paper")
    context.profile["T_grad_ms"] = 20.0  # the probe's pass, profiled: the drift can be timed
    scheme = schemes.SCHEMES[train_type](context)
    steady = train_type == "steady_anchored_training"
    scheme.reselect(0)
    first = scheme.mask.copy()

    def period(share):  # a period's steps, at `share` of their prediction
        for _ in range(6):
            scheme.observe_step(share * scheme.controller.predicted_ms(scheme.mask))

    period(1.0)  # as predicted: the budget stays
    info = scheme.reselect(3)
    assert ("elastic/drift" in info) != steady and (scheme.overhead.get("anchor", 0.0) > 0) != steady
    if steady:
        assert scheme.controller.drift == 1.0 and (scheme.mask == first).all()
        period(0.6)  # steps far under their prediction: the budget grows, and the running one no longer spends it
        scheme.reselect(6)
        target = scheme.controller.T_fp_ms + scheme.controller.budget_ms()
        assert scheme.controller.predicted_ms(first) < KEEP_SHARE * target
        assert scheme.mask.sum() > first.sum() and scheme.controller.predicted_ms(scheme.mask) <= target


def _looked(train_type: str, stage: int, **overrides):
    """A scheme of `train_type` on the tiny model whose look names `stage` (no probe)."""
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    scheme = schemes.SCHEMES[train_type](looking_context(model, train_type, **overrides))
    scheme._set_look((scheme.block_of == stage).astype(float))
    return scheme


@pytest.mark.parametrize("rho_mode", ["exact", "paper"])
def test_where_the_budget_cannot_reach_the_anchor_steps_alternate_reach_and_classifier_at_the_target(rho_mode):
    scheme = _looked("rotating_anchored_training", 0, rho=0.6, rho_mode=rho_mode)
    controller = scheme.controller
    info = scheme.reselect(0)
    assert info["rotation/on"] == 1.0 and scheme.anchor == 0
    assert (scheme.mask == reach_from(scheme.block_of, 0)).all() and scheme.mask.all()
    target = controller.target_ms
    reach_ms, head_ms = controller.predicted_ms(scheme.reach), controller.predicted_ms(scheme._head)
    assert head_ms < target < reach_ms  # the budget's own step cannot reach the anchor
    times = []
    for step in range(40):  # steps that take what the profile predicts
        mask = scheme.step_mask(step)
        assert (mask == scheme.reach).all() or (mask == scheme._head).all()
        times.append(controller.predicted_ms(mask))
        scheme.observe_step(times[-1])
    reached = sum(time == reach_ms for time in times)
    assert 0 < reached < 40 and abs(np.mean(times) - target) <= (reach_ms - head_ms) / 40
    assert scheme.typical_step_ms([]) == pytest.approx(np.mean(times))
    assert controller._samples == [reach_ms] * reached  # the loop is closed on the period's selection alone
    assert dict((mask.tobytes(), share) for mask, share in scheme.step_mix()) == pytest.approx(
        {scheme.reach.tobytes(): reached / 40, scheme._head.tobytes(): 1 - reached / 40})
    again = RotatingAnchoredTraining(scheme.context)  # a resumed run continues the same alternation
    again.load_state(scheme.state())
    assert [again.step_mask(step).tolist() for step in range(40, 50)] == [
        scheme.step_mask(step).tolist() for step in range(40, 50)]
    info = scheme.reselect(4)  # the reach again: nothing new to compile
    assert info["rotation/on"] == 1.0 and info["rotation/reach_share"] == pytest.approx(reached / 40, abs=0.05)
    assert (scheme.mask == scheme.reach).all()


def test_where_the_budget_reaches_the_anchor_the_tenths_selection_trains_every_step():
    rotating = _looked("rotating_anchored_training", 1, rho=0.7)
    tenth = _looked("steady_anchored_training", 1, rho=0.7)
    assert rotating.reselect(0)["rotation/on"] == 0.0
    tenth.reselect(0)
    assert (rotating.mask == tenth.mask).all() and rotating.reach is None
    assert all((rotating.step_mask(step) == tenth.mask).all() for step in range(5))
    for step in range(5):
        rotating.observe_step(10.0 + step)
    assert rotating.typical_step_ms([]) == 12.0 and rotating.step_mix()[0][1] == 1.0


def test_the_loop_trains_the_rotations_steps_and_times_them_as_a_mix(tmp_path, monkeypatch):
    import train
    from run_outputs import RunOutputs
    from test_train import config, tiny_profile

    monkeypatch.setattr("schemes.anchored.anchor_of", lambda sums: 0)  # the look names the first stage
    typical, measured = [], []
    original = RotatingAnchoredTraining.typical_step_ms
    monkeypatch.setattr(RotatingAnchoredTraining, "typical_step_ms",
                        lambda self, step_ms: typical.append(original(self, step_ms)) or typical[-1])
    reference = train.measure_reference
    monkeypatch.setattr(train, "measure_reference",
                        lambda steps, optimizer, mask, *rest: measured.append(mask.tolist()) or
                        reference(steps, optimizer, mask, *rest))
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    outputs = RunOutputs(str(tmp_path), "run", "tiny", 3, 16)
    run_config = config(train_type="rotating_anchored_training", num_epochs=2, logdir=str(tmp_path),
                        reference_steps=4)
    summary = train.train(run_config, model, tiny_data(), tiny_data(), 4, outputs, tiny_profile(model))
    assert summary["median_step_ms"] == typical[-1]
    head = schemes.classifier_mask(model).tolist()
    assert head in measured and [1] * len(head) in measured  # each kind timed against a full step


def test_the_twelfth_spends_its_share_of_the_target_but_not_below_the_smallest_feasible():
    assert thrifty_ratio(0.7, 0.4) == pytest.approx(SPEND_SHARE * 0.7)
    assert thrifty_ratio(0.5, 0.45) == 0.45  # its share would be infeasible: the smallest feasible
    assert thrifty_ratio(0.42, 0.45) == 0.42  # the user's own ratio is below it: left as it is


@pytest.mark.parametrize("rho_mode", ["exact", "paper"])
def test_the_twelfth_aims_at_its_share_of_the_elevenths_target_and_runs_paper_mode_open_loop(rho_mode):
    eleventh = _looked("rotating_anchored_training", 1, rho=0.95, rho_mode=rho_mode)
    twelfth = _looked("thrifty_anchored_training", 1, rho=0.95, rho_mode=rho_mode)
    assert twelfth.controller.target_ms == pytest.approx(SPEND_SHARE * eleventh.controller.target_ms)
    assert twelfth.controller.closed == (rho_mode == "exact") and eleventh.controller.closed
    assert twelfth.reselect(0)["rotation/on"] == 0.0
    budget = twelfth.controller.budget_ms()
    for step in range(40):  # steps run twice as slow as predicted
        twelfth.step_mask(step)
        twelfth.observe_step(2 * twelfth.controller.predicted_ms(twelfth.mask))
    twelfth.reselect(4)
    assert (twelfth.controller.correction == 1.0) == (rho_mode == "paper")
    assert (twelfth.controller.budget_ms() == budget) == (rho_mode == "paper")


def test_the_twelfths_rotation_in_paper_mode_mixes_on_predicted_times_whatever_the_steps_measure():
    scheme = _looked("thrifty_anchored_training", 0, rho=0.6, rho_mode="paper")
    assert scheme.reselect(0)["rotation/on"] == 1.0
    controller = scheme.controller
    predicted = []
    for step in range(40):
        mask = scheme.step_mask(step)
        predicted.append(controller.predicted_ms(mask))
        scheme.observe_step(0.5 * predicted[-1] if (mask == scheme.reach).all() else 3 * predicted[-1])
    spread = controller.predicted_ms(scheme.reach) - controller.predicted_ms(scheme._head)
    assert abs(np.mean(predicted) - controller.target_ms) <= spread / 40  # held on the prediction


def test_the_twelfth_reads_the_machines_drift_once(monkeypatch):
    monkeypatch.setattr(RotatingAnchoredTraining, "_anchored", lambda self: True)
    scheme = _looked("thrifty_anchored_training", 1, rho=0.7)
    assert scheme._anchored()
    scheme.controller.set_drift(0.9)
    assert not scheme._anchored() and isinstance(scheme, ThriftyAnchoredTraining)
    again = ThriftyAnchoredTraining(scheme.context)  # a resumed run does not read it again
    again.load_state(scheme.state())
    assert again.controller.drift_reads == 1 and again.controller.drift == 0.9 and not again._anchored()


def four_block_model() -> tf.keras.Model:
    """Two stages of two blocks each (16x16, then 14x14), every convolution with a bias."""
    inputs = tf.keras.Input((16, 16, 3))
    x = tf.keras.layers.Conv2D(4, 3, padding="same", name="a")(inputs)
    x = tf.keras.layers.Conv2D(4, 3, padding="same", name="b")(x)
    x = tf.keras.layers.Conv2D(6, 3, name="c")(x)
    x = tf.keras.layers.Conv2D(6, 3, padding="same", name="d")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(3, name="classifier")(x))


@pytest.mark.parametrize("rho_mode", ["exact", "paper"])
def test_where_the_look_names_the_top_the_twelfth_spends_the_budget_below_it(rho_mode):
    looked = {}
    for train_type in ("rotating_anchored_training", "thrifty_anchored_training"):
        tf.keras.utils.set_random_seed(0)
        scheme = schemes.SCHEMES[train_type](looking_context(four_block_model(), train_type, rho=0.95,
                                                             rho_mode=rho_mode))
        scheme._set_look((scheme.block_of >= 2).astype(float))  # the top stage, blocks 2-3
        scheme.reselect(0)
        looked[train_type] = scheme
    eleventh, twelfth = looked.values()
    assert twelfth.stages == [(0, 2), (2, 4)] and twelfth.anchor == 1 and twelfth.reach is None
    controller = twelfth.controller
    target_ms = controller.T_fp_ms + controller.budget_ms()
    below = (twelfth.block_of >= 0) & (twelfth.block_of < 2)
    assert not (eleventh.mask.astype(bool) & below).any()  # the eleventh never trains below the anchor
    assert controller.predicted_ms(eleventh.mask) < KEEP_SHARE * target_ms  # at the twelfth's target it under-spends
    assert (twelfth.mask.astype(bool) & below).any() and (twelfth.mask >= eleventh.mask).all()
    assert controller.predicted_ms(eleventh.mask) < controller.predicted_ms(twelfth.mask) <= target_ms
    assert (twelfth.mask == (eleventh.mask | controller.static_top())).all() and (twelfth.whole == twelfth.mask).all()
    kept = twelfth.mask.copy()
    assert still_spends(controller.predicted_ms(kept), target_ms, KEEP_SHARE)  # so the keep rule holds it
    twelfth.reselect(4)
    assert (twelfth.mask == kept).all()
    config = twelfth.context.config
    assert ThriftyAnchoredTraining.step_ratio_target(config) == (
        pytest.approx(SPEND_SHARE * 0.95) if rho_mode == "exact" else pytest.approx(float("nan"), nan_ok=True))


def _first_stage_named(train_type: str, rho: float, rho_mode: str, timed_drift: bool = False):
    """A scheme of `train_type` on the four-block model whose look names its first stage (blocks 0-1),
    after its first selection, and that stage's tensors. `timed_drift`: the profile timed the probe's
    pass and the look left a probed batch, so a scheme that reads the drift can."""
    tf.keras.utils.set_random_seed(0)
    context = looking_context(four_block_model(), train_type, rho=rho, rho_mode=rho_mode)
    if timed_drift:
        context.profile["T_grad_ms"] = 20.0
    scheme = schemes.SCHEMES[train_type](context)
    scheme._set_look((scheme.block_of == 0).astype(float))
    if timed_drift:
        scheme.probe.last_batch = scheme.probe_batches(1)[0]
    return scheme, scheme.reselect(0), (scheme.block_of >= 0) & (scheme.block_of < 2)


@pytest.mark.parametrize("rho_mode", ["exact", "paper"])
def test_the_sixteenth_rotates_wherever_its_selection_would_hold_only_part_of_the_named_stage(rho_mode):
    fifteenth, info, in_anchor = _first_stage_named("pooled_anchored_training", 0.8, rho_mode)
    assert info["rotation/on"] == 0.0 and 0 < fifteenth.mask[in_anchor].sum() < in_anchor.sum()  # part of it, every step
    sixteenth, info, _ = _first_stage_named("whole_stage_anchored_training", 0.8, rho_mode)
    assert info["rotation/on"] == 1.0 and (sixteenth.mask == reach_from(sixteenth.block_of, 0)).all()
    controller = sixteenth.controller
    assert controller.target_ms == pytest.approx(WHOLE_STAGE_SHARE / SPEND_SHARE * fifteenth.controller.target_ms)
    assert controller.predicted_ms(sixteenth._head) < controller.target_ms < controller.predicted_ms(sixteenth.reach)
    kinds = []
    for step in range(20):
        mask = sixteenth.step_mask(step)
        kinds.append("reach" if (mask == sixteenth.reach).all() else "head" if (mask == sixteenth._head).all() else "?")
        sixteenth.observe_step(controller.predicted_ms(mask))
    assert set(kinds) == {"reach", "head"}  # the whole stage on a share of the steps, the classifier on the rest
    assert schemes.SCHEMES["whole_stage_anchored_training"].step_ratio_target(sixteenth.context.config) == (
        pytest.approx(WHOLE_STAGE_SHARE * 0.8) if rho_mode == "exact" else pytest.approx(float("nan"), nan_ok=True))
    held, info, _ = _first_stage_named("whole_stage_anchored_training", 0.95, rho_mode)
    assert info["rotation/on"] == 0.0 and held.mask[in_anchor].all()  # the whole stage fits: every step


@pytest.mark.parametrize("rho_mode", ["exact", "paper"])
def test_the_seventeenth_is_the_sixteenth_in_paper_mode_and_open_loop_at_its_own_share_in_exact_mode(rho_mode):
    sixteenth, _, _ = _first_stage_named("whole_stage_anchored_training", 0.8, rho_mode, timed_drift=True)
    seventeenth, info, _ = _first_stage_named("open_loop_anchored_training", 0.8, rho_mode, timed_drift=True)
    share = OPEN_EXACT_SHARE / WHOLE_STAGE_SHARE if rho_mode == "exact" else 1.0
    assert seventeenth.controller.target_ms == pytest.approx(share * sixteenth.controller.target_ms)
    assert not seventeenth.controller.closed and sixteenth.controller.closed == (rho_mode == "exact")
    if rho_mode == "paper":  # the same selection, the same rotation
        assert (seventeenth.mask == sixteenth.mask).all() and info["rotation/on"] == 1.0
    controller, budget = seventeenth.controller, seventeenth.controller.budget_ms()
    for scheme in (sixteenth, seventeenth):  # steps run twice as slow as predicted
        for step in range(40):
            scheme.observe_step(2 * scheme.controller.predicted_ms(scheme.step_mask(step)))
    assert ("elastic/drift" in sixteenth.reselect(4)) == (rho_mode == "exact")  # the sixteenth times the drift
    assert "elastic/drift" not in seventeenth.reselect(4)  # the seventeenth never does, and nothing moves
    assert controller.budget_ms() == budget and controller.correction == 1.0 and controller.drift_reads == 0
    assert schemes.SCHEMES["open_loop_anchored_training"].step_ratio_target(seventeenth.context.config) == (
        pytest.approx(OPEN_EXACT_SHARE * 0.8) if rho_mode == "exact" else pytest.approx(float("nan"), nan_ok=True))


def seeded_looking_scheme(train_type: str):
    """A scheme of `train_type` on a fresh tiny model (seed 0) in a looking context at rho 0.7, and
    how many batches its look takes (--probe_batches x selections)."""
    tf.keras.utils.set_random_seed(0)
    scheme = schemes.SCHEMES[train_type](looking_context(tiny_model(), train_type, rho=0.7))
    return scheme, scheme.context.config.probe_batches * scheme.periods


def test_the_thirteenths_look_scores_on_training_images_and_leaves_the_validation_split_alone():
    looks = {}
    for train_type in ("thrifty_anchored_training", "lean_anchored_training"):
        scheme, count = seeded_looking_scheme(train_type)
        looks[train_type] = (scheme.importance(), scheme.probe_position, scheme.held_out_position, count)
    look, probed, held_out, count = looks["thrifty_anchored_training"]
    assert (probed, held_out) == (count, count)  # the twelfth: updates on training batches, scored on validation ones
    lean, probed, held_out, count = looks["lean_anchored_training"]
    assert (probed, held_out) == (2 * count, 0)  # the thirteenth: both from the training probe stream
    assert lean.shape == look.shape and np.isfinite(lean).all() and not np.allclose(lean, look)


def test_the_fourteenths_look_reads_only_the_validation_images_it_scores():
    tf.keras.utils.set_random_seed(0)
    context = looking_context(tiny_model(), "frugal_anchored_training", rho=0.7)
    context.validation = tiny_data(batches=10, seed=7)  # 80 images
    scheme = schemes.SCHEMES["frugal_anchored_training"](context)
    config = context.config
    count = config.probe_batches * scheme.periods
    assert scheme.held_out_buffer() == count * config.batch_size == 3 * 8
    twelfth = schemes.SCHEMES["thrifty_anchored_training"](looking_context(tiny_model(), "thrifty_anchored_training"))
    assert twelfth.held_out_buffer() == HELD_OUT_BUFFER
    look = scheme.importance()
    assert (scheme.probe_position, scheme.held_out_position) == (count, count) and np.isfinite(look).all()
    images = lambda batches: [image.tobytes() for batch, _ in batches for image in batch.numpy()]  # noqa: E731
    split = images(context.validation)
    scored = images(scheme._held_out.probe(0, count))
    # a buffer of 24 images: the 24 scored ones come from the split's first 24 + 23 (the refills), in the run's order
    assert len(set(scored)) == 24 and set(scored) <= set(split[:47]) and scored != split[:24]


def test_the_fifteenths_look_pools_the_fourteenths_batches():
    looks = {}
    for train_type in ("frugal_anchored_training", "pooled_anchored_training"):
        scheme, count = seeded_looking_scheme(train_type)
        batches = []  # the probe batches the look takes
        original = scheme.probe_batches

        def recording(n=None, original=original, batches=batches):
            taken = original(n)
            batches.extend(taken)
            return taken
        scheme.probe_batches = recording
        looks[train_type] = (scheme.importance(), scheme, batches)
        assert (scheme.probe_position, scheme.held_out_position) == (count, count)
    paired, _, _ = looks["frugal_anchored_training"]
    pooled, scheme, batches = looks["pooled_anchored_training"]
    assert scheme.held_out_buffer() == count * scheme.context.config.batch_size  # the fourteenth's buffer
    scored = scheme._held_out.probe(0, count)
    np.testing.assert_allclose(pooled, scheme.probe.pooled_loss_change(batches, scored), rtol=1e-6, atol=1e-12)
    assert not np.allclose(pooled, paired)
    assert scheme.sums == pytest.approx(stage_sums(pooled, scheme.block_of, scheme.stages))
    assert scheme.anchor == anchor_of(scheme.sums)


def test_the_look_measurement_builds_the_studys_run_of_the_fourteenth(tmp_path):
    import main as cli
    from experiments import look_reliability
    from experiments.study_plans import plan_protocol
    for task, key in look_reliability.TASKS.items():
        config = cli.resolve_config(cli.parse_args(look_reliability.run_flags(task, 4, str(tmp_path))))
        protocol = plan_protocol(key, "frontier")
        assert (config.dataset_name, config.weights, config.learning_rate) == (
            protocol["dataset_name"], protocol["weights"], protocol["learning_rate"])
        assert (config.train_type, config.rho, config.rho_mode, config.seed) == ("frugal_anchored_training", 0.7, "exact", 4)
        assert (config.validation, config.num_epochs, config.interval, config.probe_batches) == ("fresh", 12, 4, 1)


def test_the_look_measurement_reads_the_draws_whose_judgement_is_over(tmp_path):
    import main as cli
    from experiments import look_reliability
    for draw, key in look_reliability.SEEN.items():
        config = cli.resolve_config(cli.parse_args(look_reliability.run_flags(draw, 1, str(tmp_path))))
        assert config.dataset_name == f"embedded_{draw}" and key == f"{draw}_mobilenetv2"


def test_the_seventeenths_look_takes_as_many_batches_as_look_batches_names():
    default, count = seeded_looking_scheme("open_loop_anchored_training")
    default.importance()
    assert count == 3 and (default.probe_position, default.held_out_position) == (3, 3)
    tf.keras.utils.set_random_seed(0)
    context = looking_context(tiny_model(), "open_loop_anchored_training", rho=0.7,
                              scheme_options={"look_batches": 4})
    larger = schemes.SCHEMES["open_loop_anchored_training"](context)
    assert larger.held_out_buffer() == 4 * context.config.batch_size
    look = larger.importance()
    assert (larger.probe_position, larger.held_out_position) == (4, 4) and np.isfinite(look).all()
    assert larger.sums == pytest.approx(stage_sums(look, larger.block_of, larger.stages))
    larger.reselect(4)
    assert larger.probe_position == 4  # looked once


def test_the_look_must_fit_the_validation_split_by_its_own_count_or_the_runs_selections():
    import dataclasses
    from schemes.base import run_selections
    from test_train import config
    from utils import UserError
    seventeenth, lean = schemes.SCHEMES["open_loop_anchored_training"], schemes.SCHEMES["lean_anchored_training"]
    assert (run_selections(12, 4.0, 27), run_selections(12, 1.0, 27), run_selections(1, 0.01, 27)) == (3, 12, 27)
    study = config(train_type="open_loop_anchored_training", batch_size=32, num_epochs=12, interval=4.0)
    given = lambda count: dataclasses.replace(study, scheme_options={"look_batches": count})  # noqa: E731
    longer = dataclasses.replace(study, num_epochs=48, interval=1.0)  # 48 selections, one probe batch each
    seventeenth.check_data(study, 27, 1280)  # the study's look of 3; 1 280 images are 40 full batches of 32
    seventeenth.check_data(given(40), 27, 1280)
    with pytest.raises(UserError, match="1280 images \\(40 full batches\\).*use --look_batches 40 or fewer"):
        seventeenth.check_data(given(41), 27, 1280)
    with pytest.raises(UserError, match="the look scores 48 validation batches.*a larger --interval"):
        seventeenth.check_data(longer, 27, 1280)
    with pytest.raises(UserError, match="\\(0 full batches\\).*use a smaller --batch_size"):
        seventeenth.check_data(study, 27, 20)
    seventeenth.check_data(given(41), 27, None)  # no validation split: the look scores training batches
    lean.check_data(longer, 27, 1280)  # its look reads no validation image


def test_the_selection_record_reads_each_selections_scalars_from_the_event_logs(tmp_path):
    import json
    from experiments import selection_record
    run = tmp_path / "pooled_anchored_training_rho0.7_exact_s0"
    writer = tf.summary.create_file_writer(str(run))
    with writer.as_default():
        for step, (first, share) in enumerate([(7, 0.0), (7, 0.3)]):
            tf.summary.scalar("anchor/first_block", first, step=100 * step)
            tf.summary.scalar("rotation/reach_share", share, step=100 * step)
            tf.summary.scalar("anchor/stage3_sum", 0.004, step=100 * step)
    writer.close()
    output = tmp_path / "selections.json"
    assert selection_record.main([str(run), "--output", str(output)]) == 0
    record = json.loads(output.read_text())[run.name]
    assert record["anchor/first_block"] == [[0, 7.0], [100, 7.0]]
    assert [step for step, _ in record["rotation/reach_share"]] == [0, 100]
    assert [share for _, share in record["rotation/reach_share"]] == pytest.approx([0.0, 0.3])
    assert [value for _, value in record["anchor/stage3_sum"]] == pytest.approx([0.004, 0.004])
    assert "elastic/drift" not in record
