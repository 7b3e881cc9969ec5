"""The importance probe every selecting scheme shares: tensor importance from a probe step
(ImportanceProbe), how its gradient calls run (traced or eager, chosen by the profile's measured
costs; whole or in micro-batches under a memory budget), and the scalars of a selection."""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from elastic_trainer.deadline import selection_due, selections_in
from elastic_trainer.step_timing import typical_ms, wall_times_ms
from schemes.base import BudgetedScheme, Context, classifier_mask, interval_steps
from schemes.time_budget import StepTimeController
from train_step import Forward, eager_gradients, full_gradients, preserved_state


PROBE_MODES = ("auto", "eager", "traced")
PROBE_COST_KEYS = ("traced_first_ms", "traced_ms", "traced_step_first_ms",
                   "eager_first_ms", "eager_ms", "eager_step_first_ms")


def probe_seconds(costs: Dict[str, float], mode: str, calls: int) -> float:
    """Seconds a process's `calls` gradient calls of the probe cost in `mode`, from a profile's
    `probe_costs`: the first call (tracing and compiling, or eager's first dispatch), the rest at
    the typical call's time, and the first train step after it (which reuses the forward pass a
    traced probe traced, and traces it itself after an eager one). No calls: nothing."""
    if calls < 1:
        return 0.0
    return (costs[f"{mode}_first_ms"] + (calls - 1) * costs[f"{mode}_ms"] + costs[f"{mode}_step_first_ms"]) / 1000


def break_even_calls(costs: Dict[str, float]) -> float:
    """The number of calls from which tracing the probe costs no more than running it eagerly
    (inf when an eager call is no slower than a traced one)."""
    premium = costs["eager_ms"] - costs["traced_ms"]
    if premium <= 0:
        return float("inf")
    first = lambda mode: costs[f"{mode}_first_ms"] + costs[f"{mode}_step_first_ms"]  # noqa: E731
    return 1 + max(first("traced") - first("eager"), 0.0) / premium


def choose_probe_mode(requested: str, costs: Optional[Dict[str, float]], calls: int) -> Dict[str, object]:
    """How the probe runs for the `calls` gradient calls a process will make: `requested` unless it
    is "auto", then whichever the measured `costs` (a profile's `probe_costs`) say is cheaper for
    that many calls, traced when no costs were measured. Returns the mode, the calls, the predicted
    seconds of both modes and the break-even (when costs are known) and a sentence why."""
    if requested not in PROBE_MODES:
        raise ValueError(f"unknown probe mode {requested!r}; choose one of: {', '.join(PROBE_MODES)}")
    known = bool(costs) and all(key in costs for key in PROBE_COST_KEYS)
    choice: Dict[str, object] = {"requested": requested, "calls": int(calls)}
    if known:
        eager_s, traced_s = probe_seconds(costs, "eager", calls), probe_seconds(costs, "traced", calls)
        choice.update(eager_seconds=eager_s, traced_seconds=traced_s, break_even_calls=break_even_calls(costs))
    if requested != "auto":
        choice.update(mode=requested, why=f"--probe_mode {requested}")
    elif not known:
        choice.update(mode="traced", why="the profile did not time the probe both ways (profiler.py --probe_costs "
                                         "adds them to it): traced, the cheaper on every CPU measured")
    else:
        mode = "eager" if eager_s < traced_s else "traced"
        choice.update(mode=mode, why=f"{calls} gradient calls and the first step after them: eager {eager_s:.2f} s, "
                                     f"traced {traced_s:.2f} s with its trace (break-even at "
                                     f"{choice['break_even_calls']:.1f} calls)")
    return choice


def free_batch_gradients(model: tf.keras.Model, forward: Forward, images: tf.Tensor, labels: tf.Tensor) -> Callable:
    """`full_gradients` traced once for any batch size (the micro-batched probe's)."""
    free = [tf.TensorSpec([None, *tensor.shape[1:]], tensor.dtype) for tensor in (images, labels)]
    return full_gradients(model, forward, input_signature=free)


def micro_batched_gradients(function: Callable, images: tf.Tensor, labels: tf.Tensor,
                            chunks: int) -> List[Optional[tf.Tensor]]:
    """A batch's mean-loss gradients as the sum over `chunks` micro-batches of `function`'s
    (free_batch_gradients), each weighted by its share of the batch: the same gradients with frozen
    BatchNorm, where examples do not interact, at the peak memory of one micro-batch."""
    size = int(images.shape[0])
    bounds = np.linspace(0, size, min(chunks, size) + 1).round().astype(int)
    total: List[Optional[tf.Tensor]] = []
    for low, high in zip(bounds[:-1], bounds[1:]):
        share = (high - low) / size
        part = [None if g is None else g * share for g in function(images[low:high], labels[low:high])]
        total = part if not total else [g if t is None else t + g for t, g in zip(total, part)]
    return total


def chunked_time_ms(table: Dict[str, float], chunks: int) -> Optional[float]:
    """The profile's time of the micro-batched probe pass (`T_grad_chunks_ms`: chunk count -> ms)
    at `chunks` micro-batches, interpolated linearly between the counts it timed (None outside)."""
    known = sorted((int(count), float(ms)) for count, ms in (table or {}).items())
    if not known or not known[0][0] <= chunks <= known[-1][0]:
        return None
    return float(np.interp(chunks, [count for count, _ in known], [ms for _, ms in known]))


class ImportanceProbe:
    """Tensor importance on probe batches, every model and optimizer variable restored bit for bit.

    ElasticTrainer's importance of tensor k is I_k = -sum(g1 * dw0): dw0 the update one real
    optimizer step makes, g1 the gradient after it (how much that update lowers the loss, to first
    order). The gradient calls run traced or eagerly, whichever `plan` finds cheaper.
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
        measured the traced pass). Returns the choice (choose_probe_mode)."""
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
        first (gain_stage_training's look; how often each way names the right stage:
        docs/notebook/regime_and_depth.md). State restored
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


def memory_info(controller: StepTimeController, mask: np.ndarray) -> Dict[str, float]:
    """TensorBoard scalars of a selection under a memory budget (none without one)."""
    if controller.memory is None:
        return {}
    return {"memory/predicted_peak_mb": controller.predicted_peak_mb(mask), "memory/base_mb": controller.base_mb,
            "memory/budget_mb": controller.memory_budget_mb}


class PeriodicSelection(BudgetedScheme):
    """A budgeted scheme that starts from the classifier alone and selects anew every `interval`
    epochs with the importance probe (`reselect`); a checkpoint keeps its count of selections, its
    controller and its place in the probe's batch stream."""

    reselects = True

    def __init__(self, context: Context):
        super().__init__(context)
        self.interval_steps = interval_steps(context.config.interval, context.steps_per_epoch)
        # the selections --num_epochs makes; under a deadline as many, spread over the planned steps
        self.count = selections_in(context.steps_per_epoch * context.config.num_epochs, self.interval_steps)
        self.horizon: Optional[int] = None  # the deadline's planned steps (None: every interval_steps)
        self.selections = 0  # made so far in the run
        self.probe = ImportanceProbe(context.model, context.setup.optimizer, context.steps.forward)
        self.head = classifier_mask(context.model)

    def initial_mask(self, model: tf.keras.Model) -> np.ndarray:
        return classifier_mask(model)

    def due(self, step: int) -> bool:
        if self.horizon is not None:
            return selection_due(step, self.selections, self.count, self.horizon)
        return step % self.interval_steps == 0

    def planned_selections(self) -> int:
        return self.count

    def plan(self, total_steps: int) -> None:
        self.horizon = total_steps

    def selections_left(self, step: int) -> int:
        """Selections from `step` (one due there included) to the run's end."""
        if self.horizon is not None:
            return max(self.count - self.selections, 0)
        total = self.context.steps_per_epoch * self.context.config.num_epochs
        return -(-max(total - step, 0) // self.interval_steps)  # due at multiples of the interval

    def state(self) -> Dict:
        return {**super().state(), "selections": self.selections, "controller": self.controller.state(),
                "probe_position": self.probe_position}

    def load_state(self, state: Dict) -> None:
        super().load_state(state)
        self.selections = state["selections"]
        self.controller.load_state(state["controller"])
        self.probe_position = state["probe_position"]
