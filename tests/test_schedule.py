"""depth_schedule_training: the contiguous top at rho + 0.15 early down to rho - 0.15 late, mean rho."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import schemes
from schemes.schedule import period_rhos
from schemes.time_budget import StepTimeController
from test_train import make_context, tiny_model


def test_the_schedule_runs_linearly_from_deep_to_shallow_with_mean_rho():
    assert period_rhos(0.7, 3) == pytest.approx([0.85, 0.70, 0.55])
    assert period_rhos(0.533, 3) == pytest.approx([0.683, 0.533, 0.383])
    assert np.mean(period_rhos(0.6, 5)) == pytest.approx(0.6) and period_rhos(0.6, 5)[0] == pytest.approx(0.75)
    assert period_rhos(0.5, 1) == [0.5]
    assert period_rhos(0.95, 3) == pytest.approx([1.0, 0.95, 0.80])  # capped at a full step


def test_each_period_trains_the_static_top_of_its_own_rho_shallower_as_it_goes():
    tf.keras.utils.set_random_seed(0)
    model = tiny_model()
    # 4 steps an epoch, 3 epochs, a selection every epoch: three periods at 0.85, 0.7, 0.55
    context = make_context(model, "depth_schedule_training", rho=0.7, num_epochs=3, interval=1.0)
    scheme = schemes.SCHEMES["depth_schedule_training"](context)
    assert [scheme.due(step) for step in range(9)] == [True, False, False, False, True, False, False, False, True]
    masks = []
    for step, rho in zip((0, 4, 8), (0.85, 0.7, 0.55)):
        scheme.reselect(step)
        top = StepTimeController(context.profile, rho, 1000, "exact").static_top()
        assert scheme.mask.tolist() == (top if top.any() else scheme.initial_mask(model)).tolist()
        masks.append(scheme.mask.copy())
    assert masks[0].sum() > masks[2].sum() and (masks[0] >= masks[1]).all() and (masks[1] >= masks[2]).all()
    again = schemes.SCHEMES["depth_schedule_training"](context)  # a resumed run picks up at the same period
    again.load_state(scheme.state())
    again.reselect(12)
    assert again.controller.rho == pytest.approx(0.55) and again.selections == 4
    assert not schemes.SCHEMES["depth_schedule_training"].accepts_memory_budget
