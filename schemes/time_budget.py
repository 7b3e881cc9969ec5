"""From rho to a backward budget, and the closed loop that keeps the achieved step time on target."""
from __future__ import annotations

import logging
import math
from typing import Dict, List, Sequence

import numpy as np

import selection_solver_DP as solver
from elastic_trainer import memory_model, profile_tables
from elastic_trainer.command_line import UserError
from elastic_trainer.memory_stats import allocator_mb
from elastic_trainer.step_timing import typical_ms


class StepTimeController:
    """Turns rho into a backward budget and keeps the achieved step time on target.

    exact mode: a step is predicted as T_fp + T_bp(M) against the target rho * T_full (docs/design.md
    §1). After each selection's period, the running ratio of achieved to predicted step time corrects
    the next budget, so throttling, other load or a stale profile do not move steps off target;
    `set_drift` (today's full step over the profiled one, ElasticTraining._drift) keeps the target at
    rho times today's full step; `recalibrate` swaps in live T_fp / T_full. `open_loop()` turns the
    correction off (for a scheme that holds its target on predicted times: schemes/gain_stage.py).
    paper mode: the original's budget, (rho - 1/3) * 3/2 of the backward time, open loop.
    With `memory_budget_mb` (exact mode), selections also keep the allocator's predicted peak during
    a step (what it holds now plus memory_model's step) within that many MB.
    """

    def __init__(self, profile: Dict, rho: float, resolution: int = 1000, rho_mode: str = "exact",
                 memory_budget_mb: float = 0.0):
        self.rho, self.resolution, self.rho_mode = rho, resolution, rho_mode
        self.memory_budget_mb, self.memory = memory_budget_mb, None
        self.base_mb = 0.0  # what the allocator held when the last selection was made
        self.memory_correction, self._memory_periods = 1.0, 0  # measured / predicted step memory, averaged
        self._warned_memory = False
        if memory_budget_mb:  # main.py and train.load_profile_for check both for the user first
            if rho_mode != "exact":
                raise ValueError("a memory budget works with rho_mode 'exact' (paper mode's budget has no memory side)")
            self.memory = memory_model.MemoryModel(profile)
        self.T_fp_ms, self.T_full_ms = float(profile["T_fp_ms"]), float(profile["T_full_ms"])
        self.t_dy, self.t_dw = profile_tables.backward_tables(profile)  # backward order
        self.correction = 1.0
        self.closed = rho_mode == "exact"  # whether measured steps correct the budget (open_loop turns it off)
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

    def open_loop(self) -> "StepTimeController":
        """This controller with the closed loop off: measured steps no longer correct the budget
        (as in paper mode); the target stays what it is."""
        self.closed = False
        return self

    def set_drift(self, drift: float) -> float:
        """Re-anchor the target on a live measurement: `drift` = how long a full-gradient pass
        takes now / in the profile. Later measurements are averaged in (as the correction is), so
        one misread moves the target only half-way."""
        if math.isfinite(drift) and drift > 0:
            self._drifts += 1
            self.drift = drift if self._drifts == 1 else 0.5 * (self.drift + drift)
        return self.drift

    def allocated_mb(self) -> float:
        """MB TensorFlow's allocator holds now (weights, optimizer slots, data buffers...)."""
        stats = allocator_mb()
        if stats is None:
            raise UserError("--memory_budget_mb needs TensorFlow's allocator statistics, which this process "
                            "lacks (TF_CPU_ALLOCATOR_USE_BFC=false?); unset TF_CPU_ALLOCATOR_USE_BFC")
        return stats["current"]

    def check_memory(self, head: np.ndarray) -> None:
        """UserError before training when the memory budget cannot pay even for a step of the
        classifier alone, naming the smallest budget that can."""
        base = self.allocated_mb()
        smallest = base + self.memory.step_mb(head)
        if self.memory_budget_mb < smallest:
            raise UserError(f"--memory_budget_mb {self.memory_budget_mb:g} is below what a training step of the "
                            f"classifier alone needs: {smallest:.0f} MB ({base:.0f} MB allocated before the step "
                            f"for weights, optimizer slots and data, {smallest - base:.0f} MB for the step, by the "
                            f"profile's memory model). The smallest feasible budget for this run is "
                            f"--memory_budget_mb {math.ceil(smallest)}")

    def memory_room_mb(self) -> float:
        """What the memory budget leaves for a step now, above what is allocated (also kept as `base_mb`)."""
        self.base_mb = self.allocated_mb()
        return self.memory_budget_mb - self.base_mb

    def predicted_peak_mb(self, mask: np.ndarray) -> float:
        """The allocator's predicted peak during a step of `mask`: the base at the last selection
        plus the memory model's step, corrected by the periods measured so far."""
        return self.base_mb + self.memory_correction * self.memory.step_mb(mask)

    def observe_memory(self, predicted_mb: float, base_mb: float, measured_mb: float) -> None:
        """Close a period's memory loop: how much more (or less) than predicted its steps took above
        the base (a running average, as for time) scales the next selections' memory."""
        step = (predicted_mb - base_mb) / self.memory_correction  # the model's own prediction
        if step <= 0 or not math.isfinite(measured_mb):
            return
        ratio = max(measured_mb - base_mb, 0.0) / step
        self._memory_periods += 1
        self.memory_correction = ratio if self._memory_periods == 1 else 0.5 * (self.memory_correction + ratio)

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
        elif self.memory is not None:
            room = self.memory_room_mb() / self.memory_correction
            head = self.memory.head_step_mb
            if room < head and not self._warned_memory:
                self._warned_memory = True
                logging.warning("the memory budget leaves %.0f MB above the %.0f MB allocated now, less than a "
                                "classifier-only step needs (%.0f MB): training the classifier alone, over budget; "
                                "a budget of %d MB or more would fit", room, self.base_mb, head,
                                math.ceil(self.base_mb + self.memory_correction * head))
            _, mask = solver.select_within_budgets(self.t_dy, self.t_dw, self.memory.depth_mb[::-1],
                                                   self.memory.grad_mb[::-1], importance[::-1], budget,
                                                   max(room, 0.0), self.resolution)
        else:
            _, mask = solver.select_within_budget(self.t_dy, self.t_dw, importance[::-1], budget,
                                                  self.resolution)
        return mask[::-1].copy()

    def select_window(self, importance: np.ndarray, block_of: np.ndarray, required: np.ndarray,
                      fill: np.ndarray) -> np.ndarray:
        """The most important window selection (selection_solver_DP.select_window; forward order in and
        out) within `select`'s budget, in `static_top`'s time units; all zeros when no window fits."""
        t_dy, t_dw, budget = self._budget_units()
        _, mask = solver.select_window(t_dy, t_dw, importance[::-1], block_of[::-1], required[::-1], fill[::-1],
                                       budget)
        return mask[::-1].copy()

    def _budget_units(self):
        """(t_dy, t_dw, budget) in integer units, backward order: the original's floored ones in
        paper mode, else the run's resolution with the closed loop's budget rounded down."""
        if self.rho_mode == "paper":
            return solver.paper_problem(self.t_dy, self.t_dw, self.rho)
        t_dy, t_dw, units_per_ms = solver.quantize_times(self.t_dy, self.t_dw, self.resolution)
        return t_dy, t_dw, math.floor(self.budget_ms() * units_per_ms * (1.0 - 1e-9))

    def static_top(self) -> np.ndarray:
        """The longest contiguous top (forward-order mask) that fits the same budget as `select`,
        in the same time units (the original's floored ones in paper mode)."""
        t_dy, t_dw, budget = self._budget_units()
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
        if self.closed:  # exact mode (paper mode's budget is a share of the backward pass: open loop)
            self.correction = ratio if self.correction == 1.0 else 0.5 * (self.correction + ratio)
        if not 0.8 <= ratio <= 1.25 and not self._warned:
            self._warned = True
            logging.warning("steps run %.0f%% %s than the profile predicts: it may be stale or measured "
                            "under other load. %s; to re-measure, run the profiler again with --force, "
                            "or train with --recalibrate 1", abs(ratio - 1) * 100,
                            "slower" if ratio > 1 else "faster",
                            "The budget is corrected" if self.closed
                            else "The budget stays open loop (paper mode's, or a scheme's that holds it on predicted times)")
        return {"elastic/target_vs_achieved": achieved / self.target_ms,
                "elastic/achieved_step_ms": achieved, "elastic/predicted_step_ms": predicted}

    def state(self) -> Dict:
        """What a checkpoint keeps of the closed loop (and of live recalibration)."""
        return {"correction": self.correction, "drift": self.drift, "drifts": self._drifts, "samples": list(self._samples),
                "warned": self._warned, "memory_correction": self.memory_correction,
                "memory_periods": self._memory_periods,
                "T_fp_ms": self.T_fp_ms, "T_full_ms": self.T_full_ms,
                "t_dy": self.t_dy.tolist(), "t_dw": self.t_dw.tolist()}

    def load_state(self, state: Dict) -> None:
        self.correction, self._samples, self._warned = state["correction"], list(state["samples"]), state["warned"]
        self.drift, self._drifts = state.get("drift", 1.0), state.get("drifts", 0)  # older checkpoints: none
        self.memory_correction = state.get("memory_correction", 1.0)
        self._memory_periods = state.get("memory_periods", 0)
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
