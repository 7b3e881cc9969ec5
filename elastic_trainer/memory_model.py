"""Peak memory of a training step as a function of the selection (docs/design.md §2), pure NumPy.

With d the deepest selected tensor and M the selection (forward order, as the profile lists them):

    step peak(M) = base + max(F, c + alpha * act[d]) + sum_k M[k] * grad[k]

- act[d]: bytes of every layer input from tensor d's layer to the output, which the backward pass
  down to d keeps (profile column `act_mb`).
- grad[k]: tensor k's gradient (column `grad_mb`). Optimizer slots exist for every tensor from the
  start (so that checkpoints restore them) and belong to `base`.
- F (the floor): the forward pass's own transient peak, where shallow selections all peak: the
  lowest measured step reaching into the backbone. The classifier alone costs its own measured
  step (`head_mb`; below F with BatchNorm training). c and alpha: fitted on deeper selections' peaks.
- base: what TensorFlow's allocator holds before the step, read live at each selection.

The depth term depends on d alone, like the time model's error-gradient cost, so the two-budget
selector (selection_solver_DP.select_within_budgets) stays exact with it. The profiler measures
F, c and alpha on the device (profiler.measure_memory).
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

import numpy as np

import selection_solver_DP as solver
from elastic_trainer.profile_tables import MEMORY_KEYS, has_memory_model  # noqa: F401  (a profile's memory columns)

PROBE_COPIES = 5  # gradient-sized tensors the importance probe holds besides a pass's activations (probe_mb)
ABOVE_FLOOR = 1.1  # with fewer than two depths whose steps (gradients off) pass 1.1 F, no line is fitted (fit)


def fit(rows: Sequence[Mapping]) -> Dict[str, float]:
    """F, c and alpha from measured steps: rows of {act_mb (of the deepest selected tensor), grad_mb
    (sum over the selection), measured_mb (peak above what was allocated before)}. The first row must
    be the classifier-only step (it gives `head_mb`); the lowest of the others is F. c and alpha
    minimise the squared error (MB) of max(F, c + alpha * act) + grad over every row (a grid, zoomed in
    three times), so that steps at the floor do not pull the line as a least-squares line would
    (docs/benchmarks/memory.md). With fewer than two depths above ABOVE_FLOOR * F, the line through
    the origin that covers them all (c = 0, the safe side)."""
    if not rows:
        raise ValueError("memory calibration needs at least the classifier-only step")
    act, grad, measured = (np.array([float(row[key]) for row in rows]) for key in ("act_mb", "grad_mb", "measured_mb"))
    kept = measured - grad  # what the depth term must explain
    head = max(0.0, float(kept[0]))
    # Steps into the backbone may start above the classifier's (BatchNorm training): their own floor.
    act, grad, measured, kept = act[1:], grad[1:], measured[1:], kept[1:]
    floor = max(0.0, float(kept.min())) if len(kept) else head
    fitted = {"head_mb": head, "floor_mb": floor}
    deep = (kept > ABOVE_FLOOR * floor) & (act > 0)
    if len(np.unique(np.round(act[deep], 6))) < 2:
        if not len(act):
            return {**fitted, "c_mb": 0.0, "alpha": 0.0}
        deepest = act >= 0.5 * act.max()  # the slope of the deepest steps, which the floor does not explain
        return {**fitted, "c_mb": 0.0, "alpha": float((kept[deepest] / np.maximum(act[deepest], 1e-9)).max())}
    slope = float((kept[deep] / act[deep]).max())
    alphas, constants = np.linspace(0.0, 1.5 * slope, 301), np.linspace(-kept.max(), kept.max(), 301)
    for _ in range(4):
        predicted = np.maximum(floor, constants[None, :, None] + alphas[:, None, None] * act) + grad
        errors = ((predicted - measured) ** 2).sum(axis=-1)
        i, j = np.unravel_index(int(np.argmin(errors)), errors.shape)
        alpha, constant = float(alphas[i]), float(constants[j])
        alpha_step, constant_step = alphas[1] - alphas[0], constants[1] - constants[0]
        alphas = np.linspace(max(0.0, alpha - 2 * alpha_step), alpha + 2 * alpha_step, 41)
        constants = np.linspace(constant - 2 * constant_step, constant + 2 * constant_step, 41)
    return {**fitted, "c_mb": constant, "alpha": alpha}


class MemoryModel:
    """A profile's memory model; masks and arrays in forward order unless a name says otherwise."""

    def __init__(self, profile: Mapping):
        if not has_memory_model(profile):
            raise ValueError("the profile has no memory model")
        memory = profile["memory"]
        self.floor_mb, self.c_mb, self.alpha = (float(memory[key]) for key in MEMORY_KEYS)
        self.head_mb = float(memory.get("head_mb", self.floor_mb))  # older profiles: one floor
        self.head = [int(k) for k in memory.get("head_indices", [])]  # the classifier's tensors
        self.act_mb = np.array([float(t["act_mb"]) for t in profile["tensors"]])
        self.grad_mb = np.array([float(t["grad_mb"]) for t in profile["tensors"]])

    @property
    def depth_mb(self) -> np.ndarray:
        """max(F, c + alpha * act[d]) for each tensor d as the deepest selected; the classifier's
        own step for its tensors."""
        depth = np.maximum(self.floor_mb, self.c_mb + self.alpha * self.act_mb)
        depth[self.head] = self.head_mb
        return depth

    @property
    def head_step_mb(self) -> float:
        """A classifier-only step (the floor, for profiles that do not name the classifier's tensors)."""
        if not self.head:
            return self.floor_mb
        mask = np.zeros(len(self.act_mb), np.uint8)
        mask[self.head] = 1
        return self.step_mb(mask)

    def step_mb(self, mask: Sequence[int]) -> float:
        """Predicted peak of a step of `mask` above the allocator's base (0 for no selection)."""
        backward = np.asarray(mask)[::-1]  # the solver's order: the deepest tensor last
        return float(solver.predicted_peak(self.depth_mb[::-1], self.grad_mb[::-1], backward))

    def probe_mb(self, chunks: int = 1) -> float:
        """Predicted peak of the importance probe (schemes.probe.ImportanceProbe) with its batch cut into
        `chunks` micro-batches: the deepest step's activations over `chunks`, plus PROBE_COPIES
        gradient-sized copies (a chunk's gradients, their sum, the weights and optimizer slots the probe
        restores, the weights before its trial update; docs/benchmarks/memory.md)."""
        full = float(self.depth_mb[0])
        return max(self.floor_mb, full / chunks) + PROBE_COPIES * float(self.grad_mb.sum())

    def probe_chunks(self, room_mb: float, batch_size: int) -> Optional[int]:
        """The fewest micro-batches (at most the batch size) whose probe fits `room_mb` above the
        base; None when even one example a chunk does not fit."""
        for chunks in range(1, batch_size + 1):
            if self.probe_mb(chunks) <= room_mb:
                return chunks
        return None
