"""ElasticTrainer: importance of each tensor from a probe step, and a DP selection under the
time budget every `interval` epochs; and its importance ablations."""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

import models
from schemes.base import BudgetedScheme, Context, classifier_mask, interval_steps
from schemes.time_budget import StepTimeController
from train_step import (Forward, choose_probe_mode, chunked_time_ms, eager_gradients, free_batch_gradients,
                        full_gradients, micro_batched_gradients, preserved_state, typical_ms, wall_times_ms)


class ImportanceProbe:
    """Tensor importance on probe batches, leaving weights and optimizer state untouched.

    ElasticTrainer's importance of tensor k is I_k = -sum(g1 * dw0): dw0 is the update one real
    optimizer step makes from the current weights, g1 the gradient after it (a first-order
    estimate of how much that update lowers the loss). The probe snapshots every model
    variable (including BatchNorm statistics and RNG states) and every optimizer variable
    (slots, iterations, hence the schedules' step) and restores them bit for bit.

    Its gradient calls run traced (one tf.function: a trace and compile on the first call, fast
    after) or eagerly (no trace, each call slower); `plan` picks the cheaper for the calls a
    process will make from the profile's measured costs.
    """

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer,
                 forward: Optional[Forward] = None):
        self.model, self.optimizer = model, optimizer
        self.forward = forward or (lambda images: model(images, training=True))  # the run's shared one
        self._full_gradients = full_gradients(model, self.forward)
        self._eager_gradients = eager_gradients(model)
        self.mode = "traced"  # or "eager" (see plan)
        self.choice: Dict = {}  # the last plan's mode, calls, predicted seconds and why
        self._eager_warm = False  # whether this process has made an eager call
        self.last_batch = None  # the last batch probed (the live anchor times its calls on it)
        self.calls_ms: List[float] = []  # wall times of the last probe's gradient calls
        self.chunks = 1  # micro-batches of each probe batch (a memory budget may ask for more)
        self._chunk_gradients: Optional[Callable] = None  # traced once for any micro-batch size
        self.trace_seconds = 0.0  # one-off first calls: tracing and compiling (traced), or the first dispatch (eager)

    def plan(self, calls: int, requested: str, profile: Optional[Dict]) -> Dict:
        """Run the next `calls` gradient calls eagerly or traced (`requested`, or under "auto" the
        cheaper by the profile's `probe_costs`); micro-batched probes stay traced (the memory model
        measured the traced pass). Returns the choice (train_step.choose_probe_mode)."""
        costs = (profile or {}).get("probe_costs")
        if self.chunks > 1 and requested == "auto":
            self.choice = {**choose_probe_mode("traced", costs, calls), "requested": "auto",
                           "why": "a memory budget micro-batches the probe: traced, as the memory model measured it"}
        else:
            self.choice = choose_probe_mode(requested, costs, calls)
        self.mode = self.choice["mode"]
        return self.choice

    def profiled_ms(self, profile: Optional[Dict]) -> Optional[float]:
        """The profile's time of one whole-batch gradient call as the probe now runs it: `T_grad_ms`
        traced; eager, scaled by the eager/traced ratio the profile measured (None without it)."""
        traced = float((profile or {}).get("T_grad_ms") or 0) or None
        if self.mode == "traced" or traced is None:
            return traced
        costs = (profile or {}).get("probe_costs") or {}
        return traced * costs["eager_ms"] / costs["traced_ms"] if costs.get("traced_ms") else None

    def accounted(self, overhead: Dict[str, float], work: Callable):
        """Run `work()` (which probes) and account its wall time into a scheme's `overhead` in three
        parts: probe_trace (one-off first calls: a trace and compile, or eager's first dispatch),
        probe_calls (the other gradient calls) and probe (the rest: snapshots, the update, restores,
        host copies). (`Scheme.timed` times a block into one part; this splits one call into three.)"""
        one_off, start = self.trace_seconds, time.perf_counter()
        self.calls_ms = []
        result = work()
        total, one_off = time.perf_counter() - start, self.trace_seconds - one_off
        calls = sum(self.calls_ms) / 1000
        for part, seconds in (("probe_trace", one_off), ("probe_calls", calls), ("probe", total - one_off - calls)):
            overhead[part] = overhead.get(part, 0.0) + seconds
        return result

    def _gradients(self, images: tf.Tensor, labels: tf.Tensor) -> List[Optional[tf.Tensor]]:
        """The full gradients on one batch. With `chunks` above 1, the batch's mean-loss gradients
        summed over micro-batches, each weighted by its share (the same gradients with frozen
        BatchNorm, where examples do not interact; augmentation and dropout draw per micro-batch)."""
        if self.mode == "eager":
            function = self._eager_gradients
            return self._timed(function, lambda: function(images, labels) if self.chunks == 1 else
                               micro_batched_gradients(function, images, labels, self.chunks))
        if self.chunks == 1:
            return self._timed(self._full_gradients, lambda: self._full_gradients(images, labels))
        if self._chunk_gradients is None:  # a free batch dimension: a new chunk count traces nothing
            self._chunk_gradients = free_batch_gradients(self.model, self.forward, images, labels)
        return self._timed(self._chunk_gradients,
                           lambda: micro_batched_gradients(self._chunk_gradients, images, labels, self.chunks))

    def _timed(self, function, call: Callable[[], List[Optional[tf.Tensor]]]) -> List[Optional[tf.Tensor]]:
        """`call()` (which runs `function`: a tf.function, or the eager one), timed into `calls_ms`
        (the live anchor's) unless it was a one-off first call (one that traced and compiled the
        tf.function, or the process's first eager call): that time goes to `trace_seconds`."""
        counter = getattr(function, "experimental_get_tracing_count", None)
        traces = counter() if counter else None
        start = time.perf_counter()
        gradients = call()
        next(g for g in gradients if g is not None).numpy()  # the call has finished
        one_off = counter() != traces if counter else not self._eager_warm
        if counter is None:
            self._eager_warm = True
        if one_off:
            self.trace_seconds += time.perf_counter() - start
        else:
            self.calls_ms.append((time.perf_counter() - start) * 1000)
        return gradients

    def gradients_ms(self, step: Optional[Callable] = None, calls: int = 2) -> List[float]:
        """Typical wall times (ms) of the probe's full gradients and, given a compiled train
        `step`, of that step on the last probed batch, timed right after the probe (other load
        spanning both slows both alike). The gradients' are the last probe's own calls when it
        made some, else timed now; state restored after (dropout draws from its generator)."""
        images, labels = self.last_batch
        probed, self.calls_ms = self.calls_ms, []
        function = self._eager_gradients if self.mode == "eager" else self._full_gradients
        functions = [] if probed else [lambda: function(images, labels)[0].numpy()]
        if step is not None:
            functions.append(lambda: step(images, labels)[0].numpy())
        with preserved_state(self.model, self.optimizer):
            timed = wall_times_ms(functions, calls, block=1) if functions else []
        return [typical_ms(probed)] + timed if probed else timed

    def loss_change(self, batches: Sequence) -> np.ndarray:
        """-sum(g1 * dw0) per tensor, averaged over batches (forward order), g1 the gradient on the
        batch that made the update (ElasticTrainer's)."""
        weights = self.model.trainable_weights
        totals = np.zeros(len(weights))
        self.calls_ms = []
        for images, labels in batches:
            self.last_batch = (images, labels)
            with preserved_state(self.model, self.optimizer):
                start = [w.numpy() for w in weights]
                self.optimizer.apply_gradients(zip(self._gradients(images, labels), weights),
                                               experimental_aggregate_gradients=False)
                deltas = [w.numpy() - s for w, s in zip(weights, start)]
                after = self._gradients(images, labels)
                totals -= [float(np.sum(g.numpy() * d)) for g, d in zip(after, deltas)]
        return totals / max(len(batches), 1)

    def pooled_loss_change(self, batches: Sequence, scored: Sequence) -> np.ndarray:
        """-sum(g1 * dw0) per tensor (forward order) with one update for all `batches`: dw0 is one
        optimizer step on their mean gradient, g1 the mean gradient of the `scored` batches after
        it. loss_change pairs each update batch with one scored batch and averages the products,
        so the product of two single-batch noises never averages out; here both sides are means
        first (gain_stage_training's look: on the study's design draws, 3 + 3 batches named the stage
        the stage-alone runs gain most in on 19 run seeds of 20, paired ones on 14). State restored
        after (one save, where loss_change saves once a pair); the same gradient calls as
        loss_change on as many pairs."""
        weights = self.model.trainable_weights
        self.calls_ms = []
        if not batches or not scored:  # nothing to update on or to score with: no change, as loss_change
            return np.zeros(len(weights))

        def mean_gradients(batch_list: Sequence) -> List[np.ndarray]:
            total = None
            for images, labels in batch_list:
                gradients = [g.numpy() for g in self._gradients(images, labels)]
                total = gradients if total is None else [t + g for t, g in zip(total, gradients)]
            return [t / len(batch_list) for t in total]

        with preserved_state(self.model, self.optimizer):
            start = [w.numpy() for w in weights]
            self.optimizer.apply_gradients(zip([tf.constant(g) for g in mean_gradients(batches)], weights),
                                           experimental_aggregate_gradients=False)
            deltas = [w.numpy() - s for w, s in zip(weights, start)]
            after = mean_gradients(scored)
        self.last_batch = batches[-1]  # as loss_change leaves it: a training batch (the drift read times steps on it)
        return -np.array([float(np.sum(g * d)) for g, d in zip(after, deltas)])

    def gradient_magnitude(self, batches: Sequence) -> np.ndarray:
        """sum(|g|) per tensor, averaged over batches (ablation)."""
        totals = np.zeros(len(self.model.trainable_weights))
        self.calls_ms = []
        with preserved_state(self.model, self.optimizer):
            for images, labels in batches:
                self.last_batch = (images, labels)
                totals += [float(tf.reduce_sum(tf.abs(g))) for g in self._gradients(images, labels)]
        return totals / max(len(batches), 1)


def normalized(importance: np.ndarray) -> np.ndarray:
    """Importance scaled by max |I| (zeros stay zeros)."""
    peak = float(np.max(np.abs(importance))) if importance.size else 0.0
    return importance / peak if peak > 0 else importance


class ElasticTraining(BudgetedScheme):
    """ElasticTrainer: starting from the classifier alone, every `interval` epochs evaluate importance
    and solve the selection DP; its steps' times close the controller's loop, and a checkpoint keeps
    both."""

    train_type = "elastic_training"
    reselects = True
    overhead_parts = ("probe_trace", "probe_calls", "probe", "anchor", "dp", "recalibrate")

    def __init__(self, context: Context):
        super().__init__(context)
        self.interval_steps = interval_steps(context.config.interval, context.steps_per_epoch)
        self.selections = 0  # made so far in the run
        self.probe = ImportanceProbe(context.model, context.setup.optimizer, context.steps.forward)
        self._head = classifier_mask(context.model)
        self._selected_here = 0  # selections made by this process (not checkpointed)

    def initial_mask(self, model):
        return classifier_mask(model)

    def due(self, step: int) -> bool:
        return step % self.interval_steps == 0

    def observe_step(self, step_ms: float) -> None:
        self.controller.observe(step_ms)

    calls_per_batch = 2  # the probe's gradient calls per probe batch (the update's and the one after it)

    def probe_calls(self, step: int) -> int:
        """The gradient calls the probe makes from `step` to the run's end (this process's)."""
        total = self.context.steps_per_epoch * self.context.config.num_epochs
        selections = -(-max(total - step, 0) // self.interval_steps)  # due at multiples of the interval
        return selections * self.context.config.probe_batches * self.calls_per_batch

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
            mask = self._head.copy()
        self.mask = mask
        self.selections += 1
        self._selected_here += 1
        predicted = self.controller.predicted_ms(mask)
        info.update({"elastic/selected_fraction": float(mask.mean()),
                     "elastic/predicted_rho": predicted / self.controller.T_full_ms,
                     "elastic/correction": self.controller.correction, **memory_info(self.controller, mask)})
        return info

    def _drift(self, achieved_ms: Optional[float]) -> float:
        """How much slower than at profiling the machine ran the period that just ended: the
        probe's own full-gradient calls against the profile's time of them, scaled by how the
        period's steps (typical of hundreds) compare with the same step timed right after the
        probe. A moment of other load spanning those few calls slows both and cancels out
        instead of moving the target (one burst read 1.22 where full training ran at 1.02).
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
        """Whether this selection re-anchors rho on the machine's current speed (see `_drift`).
        The controller's exact mode only (paper mode's budget is a share of the backward pass); not at the first
        selection of a process, a run's first or a resumed run's (a new process runs its first
        steps slow), nor with --recalibrate (which re-measures full steps itself); and only with
        a profile that timed the probe's pass as it runs (whole: T_grad_ms; in micro-batches under
        a memory budget: T_grad_chunks_ms, which older profiles lack), a probed batch and the
        probe's own timed calls. Not a classifier-only step as the budgeted runs' stand-in: it reads
        the machine about 10 % fast (docs/benchmarks/memory.md, "Time and memory, traded: nine
        seeds")."""
        config = self.context.config
        return (self.controller.rho_mode == "exact" and self._selected_here > 0 and not config.recalibrate
                and bool(self._profiled_probe_ms()) and self.probe.last_batch is not None
                and (self.probe.chunks == 1 or bool(self.probe.calls_ms)))

    def state(self) -> Dict:
        return {**super().state(), "selections": self.selections, "controller": self.controller.state(),
                "probe_position": self.probe_position}

    def load_state(self, state: Dict) -> None:
        super().load_state(state)
        self.selections = state["selections"]
        self.controller.load_state(state["controller"])
        self.probe_position = state["probe_position"]

    def _recalibrate(self) -> Dict[str, float]:
        """Time classifier-only, deepest-layer-only and full steps live (state restored after)."""
        model, (images, labels) = self.context.model, self.probe_batches(self.context.config.probe_batches)[0]
        owners = models.owner_layers(model)
        masks = [self._head, np.array([o is owners[0] for o in owners], np.uint8), np.ones_like(self._head)]
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


def memory_info(controller: StepTimeController, mask: np.ndarray) -> Dict[str, float]:
    """TensorBoard scalars of a selection under a memory budget (none without one)."""
    if controller.memory is None:
        return {}
    return {"memory/predicted_peak_mb": controller.predicted_peak_mb(mask), "memory/base_mb": controller.base_mb,
            "memory/budget_mb": controller.memory_budget_mb}
