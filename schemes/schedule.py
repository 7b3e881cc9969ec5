"""A depth schedule: deep early, shallow late, at a mean budget of rho (issue 34's fourth candidate).

Front layers converge first (FreezeOut, AutoFreeze, Egeria), so the budget goes to depth early and
to the top late, with no importance at all. The run's selection periods are ElasticTrainer's (every
--interval epochs); period i of n trains the contiguous top that fits

    rho_i = rho + SPREAD * (1 - 2 i / (n - 1))        (rho itself when n is 1), capped at 1,

a linear schedule whose mean is rho. Each top is the static top's at rho_i (the same budget
arithmetic in both rho modes); in exact mode the closed loop corrects each period's budget by the
steps measured in the last. docs/benchmarks/regime_and_depth.md, "A fourth candidate".
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from schemes.base import Context, PeriodicScheme, classifier_mask

SPREAD = 0.15  # rho_i runs from rho + SPREAD to rho - SPREAD (fixed before any run, not tuned)


def period_rhos(rho: float, periods: int, spread: float = SPREAD) -> list:
    """Each period's rho: linear from rho + spread down to rho - spread (mean rho), capped at 1."""
    if periods <= 1:
        return [min(rho, 1.0)]
    return [min(rho + spread * (1 - 2 * index / (periods - 1)), 1.0) for index in range(periods)]


class DepthScheduleTraining(PeriodicScheme):
    """The contiguous top at rho_i in period i: deep early, shallow late, mean rho."""

    train_type = "depth_schedule_training"
    candidate = True
    accepts_memory_budget = False
    overhead_parts = ("dp",)

    def __init__(self, context: Context):
        super().__init__(context)
        self.rhos = period_rhos(context.config.rho, self.periods)

    def reselect(self, step: int) -> Dict[str, float]:
        info = self.controller.end_period(self.mask) if self.selections else {}
        rho = self.rhos[min(self.selections, len(self.rhos) - 1)]
        with self.timed("dp"):
            self.controller.rho = rho  # the budget of this period (the closed loop's correction carries over)
            top = self.controller.static_top()
        self.mask = top if top.any() else classifier_mask(self.context.model)
        self.selections += 1
        predicted = self.controller.predicted_ms(self.mask)
        return {**info, "schedule/rho": rho, "elastic/selected_fraction": float(np.mean(self.mask)),
                "elastic/predicted_rho": predicted / self.controller.T_full_ms}
