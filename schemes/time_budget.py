"""From rho to a backward budget, and the closed loop that keeps the achieved step time on target."""
from __future__ import annotations

import logging
import math
from typing import Dict, List, Sequence

import numpy as np

import profile_tables
import selection_solver_DP as solver
from train_step import typical_ms
from utils import UserError


class StepTimeController:
    """Turns rho into a backward budget and keeps the achieved step time on target.

    exact mode: the profile predicts a step as T_fp + T_bp(M) and the target is rho * T_full
    (docs/design.md §1). After each selection has run, the ratio of achieved to predicted step time
    (a running average) corrects the next budget, so throttling, other load or a stale profile
    do not let steps drift off target. That alone would hold steps at rho times the *profiled*
    full step; `set_drift` (how much slower the machine runs now than when profiled, from the
    probe's full gradients timed live, see ElasticTraining._drift) keeps the target at rho
    times today's full step.
    `recalibrate` swaps in live T_fp / T_full measurements instead.
    paper mode: the original's budget, (rho - 1/3) * 3/2 of the backward time, open loop.
    """

    def __init__(self, profile: Dict, rho: float, resolution: int = 1000, rho_mode: str = "exact"):
        self.rho, self.resolution, self.rho_mode = rho, resolution, rho_mode
        self.T_fp_ms, self.T_full_ms = float(profile["T_fp_ms"]), float(profile["T_full_ms"])
        self.t_dy = np.array([t["t_dy_ms"] for t in reversed(profile["tensors"])], float)  # backward order
        self.t_dw = np.array([t["t_dw_ms"] for t in reversed(profile["tensors"])], float)
        self.correction = 1.0
        self.drift, self._drifts = 1.0, 0  # today's full step / the profile's (set_drift), and how many
        self._samples: List[float] = []
        self._warned = False
        try:
            solver.check_feasible(self.t_dy, self.t_dw, rho, self.T_fp_ms, self.T_full_ms, rho_mode)
        except solver.InfeasibleBudgetError as error:
            raise UserError(f"--rho {rho}: {error}") from None

    def budget_ms(self) -> float:
        """The backward budget of the next selection (exact mode: corrected by the closed loop)."""
        if self.rho_mode == "paper":
            return solver.budget_for_rho(self.rho, self.t_dy, self.t_dw, self.T_fp_ms, self.T_full_ms, "paper")
        return self.target_ms / self.correction - self.T_fp_ms

    @property
    def target_ms(self) -> float:
        """rho times a full step as long as it takes now."""
        return self.rho * self.T_full_ms * self.drift

    def set_drift(self, drift: float) -> float:
        """Re-anchor the target on a live measurement: `drift` = how long a full-gradient pass
        takes now / in the profile. Later measurements are averaged in (as the correction is), so
        one misread moves the target only half-way."""
        if math.isfinite(drift) and drift > 0:
            self._drifts += 1
            self.drift = drift if self._drifts == 1 else 0.5 * (self.drift + drift)
        return self.drift

    def predicted_ms(self, mask: np.ndarray) -> float:
        return self.T_fp_ms + float(solver.backward_time(self.t_dy, self.t_dw, mask[::-1]))

    def select(self, importance: np.ndarray) -> np.ndarray:
        """The most important selection (forward order) whose step time fits the target (exact
        mode, corrected) or the original's backward budget (paper mode)."""
        if self.rho_mode == "paper":
            _, mask = solver.select_paper(self.t_dy, self.t_dw, importance[::-1], self.rho)
            return mask[::-1].copy()
        budget = self.budget_ms()
        costs = np.concatenate(([0.0], np.cumsum(self.t_dy)[:-1])) + self.t_dw  # each tensor alone
        if budget < costs.min():
            logging.warning("the step-time target leaves %.1f ms for the backward pass, less than the "
                            "cheapest tensor needs (%.1f ms); training that tensor alone", budget, costs.min())
            mask = np.zeros(len(costs), np.uint8)
            mask[int(np.argmin(costs))] = 1
        else:
            _, mask = solver.select_within_budget(self.t_dy, self.t_dw, importance[::-1], budget,
                                                  self.resolution)
        return mask[::-1].copy()

    def static_top(self) -> np.ndarray:
        """The longest contiguous top (forward-order mask) that fits the same budget as `select`,
        in the same time units (the original's floored ones in paper mode)."""
        if self.rho_mode == "paper":
            t_dy, t_dw, budget = solver.paper_problem(self.t_dy, self.t_dw, self.rho)
        else:
            t_dy, t_dw, units_per_ms = solver.quantize_times(self.t_dy, self.t_dw, self.resolution)
            budget = math.floor(self.budget_ms() * units_per_ms * (1.0 - 1e-9))
        return solver.top_within_budget(t_dy, t_dw, budget)[::-1].copy()

    def observe(self, step_ms: float) -> None:
        self._samples.append(step_ms)

    def end_period(self, mask: np.ndarray) -> Dict[str, float]:
        """Close the period of `mask`: compare achieved with predicted and update the correction."""
        samples, self._samples = self._samples[1:], []  # a warm-up step (the compiling call is not here)
        if len(samples) < 3:
            return {}
        achieved, predicted = typical_ms(samples), self.predicted_ms(mask)
        ratio = achieved / predicted
        if self.rho_mode == "exact":  # the paper's budget is a share of the backward pass: open loop
            self.correction = ratio if self.correction == 1.0 else 0.5 * (self.correction + ratio)
        if not 0.8 <= ratio <= 1.25 and not self._warned:
            self._warned = True
            logging.warning("steps run %.0f%% %s than the profile predicts: it may be stale or measured "
                            "under other load. %s; to re-measure, run the profiler again with --force, "
                            "or train with --recalibrate 1", abs(ratio - 1) * 100,
                            "slower" if ratio > 1 else "faster",
                            "The budget is corrected" if self.rho_mode == "exact"
                            else "Paper mode keeps the original's open-loop budget")
        return {"elastic/target_vs_achieved": achieved / self.target_ms,
                "elastic/achieved_step_ms": achieved, "elastic/predicted_step_ms": predicted}

    def state(self) -> Dict:
        """What a checkpoint keeps of the closed loop (and of live recalibration)."""
        return {"correction": self.correction, "drift": self.drift, "drifts": self._drifts, "samples": list(self._samples),
                "warned": self._warned,
                "T_fp_ms": self.T_fp_ms, "T_full_ms": self.T_full_ms,
                "t_dy": self.t_dy.tolist(), "t_dw": self.t_dw.tolist()}

    def load_state(self, state: Dict) -> None:
        self.correction, self._samples, self._warned = state["correction"], list(state["samples"]), state["warned"]
        self.drift, self._drifts = state.get("drift", 1.0), state.get("drifts", 0)  # older checkpoints: none
        self.T_fp_ms, self.T_full_ms = state["T_fp_ms"], state["T_full_ms"]
        self.t_dy, self.t_dw = np.array(state["t_dy"], float), np.array(state["t_dw"], float)

    def recalibrate(self, measured_ms: Sequence[float], masks: Sequence[np.ndarray]) -> None:
        """Re-fit the time model to live step times of the classifier-only, deepest-layer-only and
        full selections (as the profiler calibrates it); tensor times keep their proportions."""
        t_dw, t_dy = self.t_dw[::-1], self.t_dy[::-1]  # forward order
        parts = [profile_tables.time_parts(t_dw, t_dy, np.flatnonzero(mask)) for mask in masks]
        try:
            T_fp, dw_scale, dy_scale = profile_tables.fit_time_model(*parts, *measured_ms)
        except UserError:
            logging.warning("live step times too noisy to recalibrate (%s ms)", ", ".join(f"{m:.1f}" for m in measured_ms))
            return
        self.t_dw, self.t_dy = self.t_dw * dw_scale, self.t_dy * dy_scale
        self.T_fp_ms, self.T_full_ms, self.correction = T_fp, measured_ms[2], 1.0
        self.drift, self._drifts = 1.0, 0
