"""ElasticTrainer: importance of each tensor from a probe step, and a DP selection under the
time budget every `interval` epochs; and its importance ablations."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

import models
from elastic_trainer.step_timing import wall_times_ms
from schemes.base import Context
from schemes.probe import PeriodicSelection, chunked_time_ms, memory_info, normalized
from train_step import preserved_state


class ElasticTraining(PeriodicSelection):
    """ElasticTrainer: starting from the classifier alone, every `interval` epochs evaluate importance
    and solve the selection DP; its steps' times close the controller's loop, and a checkpoint keeps
    both."""

    train_type = "elastic_training"
    overhead_parts = ("probe_trace", "probe_calls", "probe", "anchor", "dp", "recalibrate")

    def __init__(self, context: Context):
        super().__init__(context)
        self._selected_here = 0  # selections made by this process (not checkpointed)

    def observe_step(self, step_ms: float) -> None:
        self.controller.observe(step_ms)

    calls_per_batch = 2  # the probe's gradient calls per probe batch (the update's and the one after it)

    @classmethod
    def selection_calls(cls, config) -> Tuple[int, int]:
        return config.probe_batches * cls.calls_per_batch, 0

    def probe_calls(self, step: int) -> int:
        """The gradient calls the probe makes from `step` to the run's end (this process's)."""
        return self.selections_left(step) * self.context.config.probe_batches * self.calls_per_batch

    def importance(self) -> np.ndarray:
        return self.probe.loss_change(self.probe_batches(self.context.config.probe_batches))

    def observe_memory(self, selection: Dict) -> None:
        if self.controller.memory is not None and "measured_mb" in selection:
            self.controller.observe_memory(selection["predicted_mb"], selection["base_mb"], selection["measured_mb"])

    def reselect(self, step: int) -> Dict[str, float]:
        info = self.controller.end_period(self.mask) if self.selections else {}
        recalibrate = self.context.config.recalibrate
        if recalibrate and self.selections and self.selections % recalibrate == 0:
            with self.timed("recalibrate"):
                info.update(self._recalibrate())
        if self.controller.memory is not None:  # the probe's full backward pass in micro-batches that fit
            room = self.controller.memory_room_mb() / self.controller.memory_correction
            batch_size = self.context.config.batch_size
            self.probe.chunks = self.controller.memory.probe_chunks(room, batch_size) or batch_size
            info["memory/probe_chunks"] = self.probe.chunks
        if not self._selected_here or self.probe.chunks > 1:  # once a process (a budget's chunks: traced)
            self.facts["probe"] = self.probe.plan(self.probe_calls(step), self.context.config.probe_mode,
                                                  self.context.profile)
        importance = normalized(self.probe.accounted(self.overhead, self.importance))
        if self._anchored():
            with self.timed("anchor"):
                measured = self._drift(info.get("elastic/achieved_step_ms"))
            info.update({"elastic/drift_measured": measured, "elastic/drift": self.controller.set_drift(measured)})
        self.last_importance = importance
        with self.timed("dp"):
            mask = self.controller.select(importance)  # the DP's, within the budget
        if not mask.any():  # nothing is worth its time: keep learning in the classifier
            mask = self.head.copy()
        self.mask = mask
        self.selections += 1
        self._selected_here += 1
        predicted = self.controller.predicted_ms(mask)
        info.update({"selection/trained_fraction": float(mask.mean()),
                     "selection/predicted_ratio": predicted / self.controller.T_full_ms,
                     "elastic/correction": self.controller.correction, **memory_info(self.controller, mask)})
        return info

    def _drift(self, achieved_ms: Optional[float]) -> float:
        """How much slower than at profiling the machine ran the period that just ended: the probe's
        calls against the profile's time of them, scaled by the period's typical step over the same
        step timed beside the probe (a burst of load over those few calls then cancels out).
        Without a measured period or its cached step, the probe's calls alone."""
        steps, T_grad = self.context.steps, self._profiled_probe_ms()
        if achieved_ms and steps.has(self.mask):
            gradients_ms, step_ms = self.probe.gradients_ms(steps.get(self.mask))
            return gradients_ms * (achieved_ms / step_ms) / T_grad
        return self.probe.gradients_ms()[0] / T_grad

    def _profiled_probe_ms(self) -> Optional[float]:
        """The profile's time of the probe's pass as it runs now: whole (`T_grad_ms`, scaled to an
        eager call when the probe runs eagerly) or, under a memory budget, in `probe.chunks`
        micro-batches (`T_grad_chunks_ms`; None when the profile did not time that many)."""
        profile = self.context.profile or {}
        if self.probe.chunks > 1:
            return chunked_time_ms(profile.get("T_grad_chunks_ms"), self.probe.chunks)
        return self.probe.profiled_ms(profile)

    def _anchored(self) -> bool:
        """Whether this selection re-anchors rho on the machine's current speed (`_drift`): in exact
        mode, not at a process's first selection (its first steps run slow), not with --recalibrate,
        and only where the profile timed the probe's pass as it now runs and the probe has timed calls.
        (A classifier-only step would read the machine fast: docs/benchmarks/memory.md.)"""
        config = self.context.config
        return (self.controller.rho_mode == "exact" and self._selected_here > 0 and not config.recalibrate
                and bool(self._profiled_probe_ms()) and self.probe.last_batch is not None
                and (self.probe.chunks == 1 or bool(self.probe.calls_ms)))

    def _recalibrate(self) -> Dict[str, float]:
        """Time classifier-only, deepest-layer-only and full steps live (state restored after)."""
        model, (images, labels) = self.context.model, self.probe_batches(self.context.config.probe_batches)[0]
        owners = models.owner_layers(model)
        masks = [self.head, np.array([o is owners[0] for o in owners], np.uint8), np.ones_like(self.head)]
        steps = [self.context.steps.get(mask) for mask in masks]
        with preserved_state(model, self.context.setup.optimizer):
            for step in steps:  # compile (if new) and warm up
                step(images, labels)[0].numpy()
            measured = wall_times_ms([lambda s=s: s(images, labels)[0].numpy() for s in steps], 10)
        self.controller.recalibrate(measured, masks)
        return {"time/live_T_head_ms": measured[0], "time/live_T_path_ms": measured[1],
                "time/live_T_full_ms": measured[2], "time/live_T_fp_ms": self.controller.T_fp_ms}


class ElasticWeightMagnitude(ElasticTraining):
    """Ablation: importance = sum |w| per tensor."""

    train_type = "elastic_training_weight_magnitude"
    accepts_memory_budget = False
    calls_per_batch = 0

    def importance(self) -> np.ndarray:
        return np.array([float(tf.reduce_sum(tf.abs(w))) for w in self.context.model.trainable_weights])


class ElasticGradMagnitude(ElasticTraining):
    """Ablation: importance = sum |dL/dw| per tensor on the probe batches."""

    train_type = "elastic_training_grad_magnitude"
    accepts_memory_budget = False
    calls_per_batch = 1

    def importance(self) -> np.ndarray:
        return self.probe.gradient_magnitude(self.probe_batches(self.context.config.probe_batches))
