"""gain_stage_training is issue 34's seventeenth candidate (open_loop_anchored_training) rewritten as
one scheme: the same look, the same selections, the same steps, on the same seed. Kept while the
seventeenth's class exists (until the candidates are retired; tests/test_gain_stage.py then pins the
selections this test compared)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from schemes.anchored import OpenLoopAnchoredTraining
from schemes.gain_stage import GainStageTraining
from test_gain_stage import four_block_model
from test_train import make_context, tiny_data, tiny_model

TYPES = {OpenLoopAnchoredTraining: "open_loop_anchored_training", GainStageTraining: "gain_stage_training"}


def run(cls, model_function, rho, rho_mode, look_batches, validation, stage=None, slow=1.0):
    """Three periods of four steps of `cls` on a fresh model of seed 0: each period's report, each
    step's mask, then a resumed copy's next steps. `stage`: force the look to name that stage."""
    tf.keras.utils.set_random_seed(0)
    context = make_context(model_function(), TYPES[cls], num_epochs=3, interval=1.0, rho=rho, rho_mode=rho_mode,
                           scheme_options={"look_batches": look_batches})
    if validation:
        context.validation = tiny_data(batches=6, seed=7)
    scheme = cls(context)
    if stage is not None:
        scheme._set_look((scheme.block_of == scheme.stages[stage][0]).astype(float))
    trace = []
    for period in range(3):
        info = scheme.reselect(4 * period)
        trace.append({key: value for key, value in info.items() if not key.startswith("elastic/correction")})
        for step in range(4 * period, 4 * period + 4):
            mask = scheme.step_mask(step).copy()
            trace.append(mask.tolist())
            scheme.observe_step(slow * scheme.controller.predicted_ms(mask))  # open loop: nothing moves
    trace.append([(mask.tolist(), share) for mask, share in scheme.step_mix()])
    trace.append(scheme.typical_step_ms([]))
    again = cls(context)
    again.load_state(scheme.state())
    trace += [again.step_mask(step).tolist() for step in range(12, 20)]
    trace.append(again.reselect(20)["rotation/on"])
    return scheme, trace


# (model, rho, rho_mode, look batches, a validation split, a stage the look is forced to name): between
# them, rotating and held stages in both modes, a kept selection, a top stage joined with the longest
# contiguous top (four_block_model at 0.95 exact), looks with and without a validation split
CASES = [(tiny_model, 0.6, "exact", 3, True, None), (tiny_model, 0.8, "paper", 5, True, None),
         (tiny_model, 0.95, "exact", 2, True, 1), (tiny_model, 0.8, "paper", 2, True, 1),
         (four_block_model, 0.8, "exact", 3, False, None), (four_block_model, 0.95, "exact", 3, True, None),
         (four_block_model, 0.95, "exact", 2, True, 0), (four_block_model, 0.6, "paper", 3, False, None),
         (four_block_model, 0.8, "paper", 5, True, None), (four_block_model, 0.8, "exact", 2, True, 0)]


@pytest.mark.parametrize("model, rho, rho_mode, look, validation, stage", CASES)
def test_the_same_look_selections_and_steps_as_the_seventeenth(model, rho, rho_mode, look, validation, stage):
    old, old_trace = run(OpenLoopAnchoredTraining, model, rho, rho_mode, look, validation, stage, slow=1.7)
    new, new_trace = run(GainStageTraining, model, rho, rho_mode, look, validation, stage, slow=1.7)
    np.testing.assert_array_equal(new.look, old.look)  # bit for bit: the same batches, the same gradients
    assert (new.stage, new.sums) == (old.anchor, old.sums)
    assert new.controller.target_ms == old.controller.target_ms and not new.controller.closed
    assert new_trace == old_trace
    assert (new.probe_position, new.held_out_position) == (old.probe_position, old.held_out_position)
    assert GainStageTraining.step_ratio_target(new.context.config) == pytest.approx(
        OpenLoopAnchoredTraining.step_ratio_target(old.context.config), nan_ok=True)
