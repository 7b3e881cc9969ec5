"""The importance probe runs eagerly or traced, whichever its measured costs say is cheaper for the
calls a run makes (issue 55), with the same numbers either way."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import schemes
from schemes import probe
from test_train import make_context, tiny_data, tiny_model
from train_step import make_optimizer

# A trace of 1.5 s, of which the first step after it reuses 0.4 s (the forward pass), against an eager
# premium of 100 ms a call: tracing pays from 1 + (2500 - 1700) / 100 = 9 calls.
COSTS = {"traced_first_ms": 1500.0, "traced_ms": 50.0, "traced_step_first_ms": 1000.0,
         "eager_first_ms": 300.0, "eager_ms": 150.0, "eager_step_first_ms": 1400.0}


def test_the_cheaper_mode_for_the_calls_a_run_makes():
    assert probe.break_even_calls(COSTS) == pytest.approx(9.0)
    few = probe.choose_probe_mode("auto", COSTS, 6)  # ElasticTrainer's 3 selections of 2 calls
    assert few["mode"] == "eager" and few["calls"] == 6
    assert few["eager_seconds"] == pytest.approx(0.3 + 5 * 0.15 + 1.4)
    assert few["traced_seconds"] == pytest.approx(1.5 + 5 * 0.05 + 1.0)  # the step after it reuses the forward
    assert "6 gradient calls" in few["why"] and "break-even at 9.0 calls" in few["why"]
    assert probe.choose_probe_mode("auto", COSTS, 24)["mode"] == "traced"  # a look of 12 + 12 batches
    assert probe.choose_probe_mode("auto", COSTS, 9)["mode"] == "traced"  # a tie traces, as before
    # without the step's reuse counted, tracing would look 0.4 s dearer than it is
    assert probe.choose_probe_mode("auto", {**COSTS, "traced_step_first_ms": 1400.0}, 9)["mode"] == "eager"
    assert probe.choose_probe_mode("auto", COSTS, 0)["mode"] == "traced"  # nothing to call: no change
    # an eager call no slower than a traced one: eager for any number of calls
    assert probe.break_even_calls({**COSTS, "eager_ms": 50.0}) == float("inf")
    assert probe.choose_probe_mode("auto", {**COSTS, "eager_ms": 50.0}, 10 ** 6)["mode"] == "eager"


def test_a_requested_mode_is_kept_and_a_profile_without_costs_traces():
    assert probe.choose_probe_mode("traced", COSTS, 6)["mode"] == "traced"
    forced = probe.choose_probe_mode("eager", None, 100)
    assert forced["mode"] == "eager" and forced["why"] == "--probe_mode eager" and "eager_seconds" not in forced
    older = probe.choose_probe_mode("auto", {"traced_ms": 50.0, "eager_ms": 150.0}, 6)  # not measured whole
    assert older["mode"] == "traced" and "profiler.py --probe_costs adds them" in older["why"]
    with pytest.raises(ValueError, match="unknown probe mode 'lazy'"):
        probe.choose_probe_mode("lazy", COSTS, 6)


def test_eager_and_traced_probes_give_the_same_importances_within_float_rounding():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    setup = make_optimizer("sgd", 0.05, 5e-4, 100)
    batches = list(tiny_data(seed=1).take(2))
    scored = list(tiny_data(seed=2).take(2))
    probe = schemes.ImportanceProbe(model, setup.optimizer)
    results = {}
    for mode in ("traced", "eager"):
        probe.mode = mode
        results[mode] = (probe.loss_change(batches), probe.pooled_loss_change(batches, scored),
                         probe.gradient_magnitude(batches))
    for traced, eager in zip(results["traced"], results["eager"]):
        assert np.any(traced != 0)
        np.testing.assert_allclose(eager, traced, rtol=1e-4, atol=1e-6 * np.abs(traced).max())
    # the same ranking, hence the same selection
    assert list(np.argsort(results["eager"][0])) == list(np.argsort(results["traced"][0]))


def test_an_eager_probe_never_traces_and_times_its_calls_after_the_first():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    probe = schemes.ImportanceProbe(model, make_optimizer("sgd", 0.05, 5e-4, 100).optimizer)
    probe.plan(4, "eager", None)
    probe.loss_change(list(tiny_data().take(1)))
    assert probe._full_gradients.experimental_get_tracing_count() == 0
    assert probe.trace_seconds > 0 and len(probe.calls_ms) == 1  # the process's first eager call is one-off
    probe.loss_change(list(tiny_data().take(1)))
    assert len(probe.calls_ms) == 2  # warm now: both calls timed for the live anchor
    # the live anchor reads an eager call against the profile's traced one scaled by the measured ratio
    assert probe.profiled_ms({"T_grad_ms": 40.0, "probe_costs": COSTS}) == pytest.approx(120.0)
    assert probe.profiled_ms({"T_grad_ms": 40.0}) is None  # no eager measurement: no anchor
    probe.plan(4, "traced", None)
    assert probe.profiled_ms({"T_grad_ms": 40.0, "probe_costs": COSTS}) == 40.0


def test_elastic_training_plans_its_probe_for_the_calls_left_in_the_process():
    tf.keras.utils.set_random_seed(0)
    context = make_context(tiny_model(), "elastic_training", num_epochs=3, rho=0.9, rho_mode="exact")
    context.profile["probe_costs"] = COSTS
    scheme = schemes.ElasticTraining(context)  # 4 steps an epoch, a selection every epoch
    assert scheme.probe_calls(0) == 6 and scheme.probe_calls(4) == 4 and scheme.probe_calls(9) == 2
    scheme.reselect(0)
    assert scheme.facts["probe"]["mode"] == "eager" and scheme.facts["probe"]["calls"] == 6
    assert scheme.probe._full_gradients.experimental_get_tracing_count() == 0
    many = make_context(tiny_model(), "elastic_training", num_epochs=3, probe_batches=3, rho=0.9)
    many.profile["probe_costs"] = COSTS
    busy = schemes.ElasticTraining(many)
    busy.reselect(0)  # 3 selections of 3 batches of 2 calls: 18, past the break-even (9)
    assert busy.facts["probe"]["mode"] == "traced" and busy.facts["probe"]["calls"] == 18


def test_a_memory_budget_keeps_the_micro_batched_probe_traced():
    probe = schemes.ImportanceProbe(tiny_model(), make_optimizer("sgd", 0.05, 5e-4, 100).optimizer)
    probe.chunks = 4
    choice = probe.plan(2, "auto", {"probe_costs": COSTS})
    assert choice["mode"] == "traced" and "memory budget" in choice["why"]


def test_the_projection_pays_fixed_costs_once_and_steps_at_their_measured_times():
    from bench import projection

    measured = {"startup": 5.0, "full_first": 3.0, "full_step": 1.0, "et_first": 2.5, "et_step": 0.5,
                "selection_first": 2.0, "selection_later": 1.0, "inference": 0.25}
    short = projection.project(measured, 10, 3, 8)
    assert short["full_train"] == pytest.approx(3.0 + 9 * 1.0)
    assert short["et_train"] == pytest.approx(2.0 + 2 * 1.0 + 3 * 2.0 + 10 * 0.5)  # selections, compiles, steps
    assert short["process_speedup"] == pytest.approx((12 + 5 + 2) / (15 + 5 + 2))
    long = projection.project(measured, 10_000, 3, 8)
    # the fixed costs fade: the speedups approach the step ratio's inverse from below
    assert short["training_speedup"] < long["training_speedup"] < 2.0
    assert long["training_speedup"] == pytest.approx(2.0, rel=0.01)


def test_a_first_selection_s_costs_are_timed_as_a_run_pays_them_and_leave_the_model_as_it_was():
    import profiler

    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    images, labels = next(iter(tiny_data()))
    before = [v.numpy().copy() for v in model.variables]
    for mode in ("eager", "traced"):
        measured = profiler.first_calls(model, mode, images, labels)
        assert measured["first_ms"] > 0 and measured["step_first_ms"] > 0
    for old, variable in zip(before, model.variables):
        np.testing.assert_array_equal(old, variable.numpy())
