"""What a run's first batches and loss curve say (elastic_trainer/diagnostics.py): a class-sorted order
is flagged, a run at chance warned a third of the way in."""
from __future__ import annotations

import logging

import numpy as np

from elastic_trainer import diagnostics


def test_class_mix_flags_a_class_sorted_order_and_passes_a_shuffled_one():
    sorted_order = [[0] * 8, [0] * 8, [1] * 8, [1] * 8]  # 20 classes, read class by class
    sentence, flagged = diagnostics.class_mix(sorted_order, 20)
    assert flagged and "hold 2 of 20 classes, 1.0 a batch" in sentence
    rng = np.random.default_rng(0)
    shuffled = [rng.integers(0, 20, 8) for _ in range(4)]
    sentence, flagged = diagnostics.class_mix(shuffled, 20)
    assert not flagged and f"hold {len(set(np.concatenate(shuffled)))} of 20" in sentence
    assert diagnostics.class_mix([[0, 1], [1, 0]], 2)[1] is False  # two classes: both seen
    assert diagnostics.class_mix([[1] * 8] * 4, 2)[1] is True  # 32 draws of one class of two: 2 ** -31
    assert diagnostics.class_mix([[1] * 4] * 2, 2)[1] is False  # 8 draws: 1 in 128, not yet telling


# Issue 61: training loss per epoch of full training on shared/fixtures/fresh_validation/, 12 epochs
# (docs/benchmarks/fresh_validation.md): seed 2 ended at 6.83 % (chance 5 %), seed 0 at 43.83 %.
STUCK = [3.064, 3.005, 3.003, 3.0, 3.0, 2.99, 2.989, 2.977, 2.974, 2.958, 2.952, 2.941]
LEFT = [3.047, 2.983, 2.912, 2.648, 2.501, 2.3, 2.089, 1.975, 1.835, 1.705, 1.602, 1.585]
LATE = [3.058, 3.002, 2.987, 2.944, 2.797, 2.575, 2.425, 2.235, 2.067, 1.927, 1.85, 1.816]  # 41.67 %


def test_at_chance_warns_a_third_in_on_a_plateau_and_not_on_a_run_that_left_it():
    warned = [epoch for epoch, loss in enumerate(STUCK, 1) if diagnostics.at_chance(loss, 20, epoch, 12)]
    assert warned[0] == 4 and "within 1 % of ln(20) = 2.996" in diagnostics.at_chance(STUCK[3], 20, 4, 12)
    for curve in (LEFT, LATE):  # every epoch at loss 3.0 before a third of the run: no warning yet
        assert not [epoch for epoch, loss in enumerate(curve, 1) if diagnostics.at_chance(loss, 20, epoch, 12)]
    assert diagnostics.at_chance(3.0, 20, 1, 12) is None  # the first epoch sits at ln(C) on every run
    assert diagnostics.at_chance(float("nan"), 20, 6, 12) is None and diagnostics.at_chance(1.0, 1, 6, 12) is None
    assert diagnostics.at_chance(0.60, 2, 6, 12) is None and diagnostics.at_chance(0.70, 2, 6, 12)  # ln(2) = 0.693


def test_the_loop_warns_once_when_the_loss_is_still_at_chance_a_third_in(caplog):
    """Issue 61: the loop's ChanceWarning (Loop.end_epoch asks it with the epoch's mean training loss)."""
    chance = diagnostics.ChanceWarning(20)
    with caplog.at_level(logging.WARNING):
        for epoch, loss in enumerate([3.06, 3.00, 3.00, 3.00, 2.99, 2.99], 1):
            chance.check(loss, epoch, 12)
    warnings = [r.getMessage() for r in caplog.records if "no better than chance" in r.getMessage()]
    assert len(warnings) == 1 and "after 4 of 12 epochs" in warnings[0] and "--head_init zeros" in warnings[0]
