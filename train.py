"""One training loop, the paper's training schemes, and ElasticTrainer's runtime selection.

A scheme is a strategy that answers "which tensors train now?" as a 0/1 mask over
model.trainable_weights; elastic schemes re-decide every `interval` epochs. The loop runs the
compiled step of the current mask (cached per mask), and never asks which scheme it runs.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import math
import os
import signal
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from tqdm import tqdm

import data
import models
import profile_tables
import selection_solver_DP as solver
from checkpoints import RunCheckpoints
from run_outputs import RunOutputs
from train_step import (Forward, OptimizerSetup, TrainStep, classification_loss, make_optimizer, shared_forward,
                        typical_ms, variables_by_mask, wall_time_samples, wall_times_ms)
from utils import UserError

NORMALIZATION_LAYERS = (tf.keras.layers.BatchNormalization, tf.keras.layers.LayerNormalization,
                        tf.keras.layers.GroupNormalization)
PRUNE_PENALTY = 1e-4  # weight of the L1 penalty on kernels (PruneTrain baseline)
CACHED_STEPS = 8  # compiled train steps kept (one per distinct selection)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The resolved configuration of one run (saved as config.json next to its logs)."""

    model_name: str
    dataset_name: str
    train_type: str
    input_size: int
    batch_size: int
    num_classes: int
    optimizer: str
    learning_rate: float
    weight_decay: float
    num_epochs: int
    run_name: str
    save_model: bool
    save_txt: bool
    interval: float
    rho: float
    weights: str
    data_dir: Optional[str]
    seed: int
    profile: Optional[str]
    probe_batches: int
    logdir: str
    recalibrate: int
    bn_mode: str = "frozen"
    rho_mode: str = "exact"
    reference_steps: int = 20
    checkpoint_every: int = 0  # steps between mid-epoch checkpoints (0: at epoch ends only)
    resolution: int = 1000


# ----------------------------------------------------------------------------- variable roles

def classifier_mask(model: tf.keras.Model) -> np.ndarray:
    """Tensors of the layer nearest the loss (the classifier)."""
    return np.isin(np.arange(len(model.trainable_weights)), models.head_indices(model)).astype(np.uint8)


def bn_plus_bias_mask(model: tf.keras.Model) -> np.ndarray:
    """Normalization gammas/betas, every layer's bias, and the classifier."""
    roles = [isinstance(owner, NORMALIZATION_LAYERS) or variable is getattr(owner, "bias", None)
             for owner, variable in zip(models.owner_layers(model), model.trainable_weights)]
    return np.array(roles, np.uint8) | classifier_mask(model)


def kernels(model: tf.keras.Model) -> List[tf.Variable]:
    """Weight kernels of convolutional and dense layers (by role, not by name)."""
    found = []
    for owner, variable in zip(models.owner_layers(model), model.trainable_weights):
        if any(variable is getattr(owner, name, None)
               for name in ("kernel", "depthwise_kernel", "pointwise_kernel")):
            found.append(variable)
    return found


# ------------------------------------------------------------------------ importance evaluator

class ImportanceProbe:
    """Tensor importance on probe batches, leaving weights and optimizer state untouched.

    ElasticTrainer's importance of tensor k is I_k = -sum(g1 * dw0): dw0 is the update one real
    optimizer step makes from the current weights, g1 the gradient after it (a first-order
    estimate of how much that update lowers the loss). The probe snapshots every model
    variable (including BatchNorm statistics and RNG states) and every optimizer variable
    (slots, iterations, hence the schedules' step) and restores them bit for bit.
    """

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer,
                 forward: Optional[Forward] = None):
        self.model, self.optimizer = model, optimizer
        self.forward = forward or (lambda images: model(images, training=True))  # the run's shared one
        self._gradients = tf.function(self._compute_gradients)

    def _compute_gradients(self, images: tf.Tensor, labels: tf.Tensor) -> List[tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(self.model.trainable_weights)
            loss = classification_loss(labels, self.forward(images))
        return tape.gradient(loss, self.model.trainable_weights)

    def loss_change(self, batches: Sequence) -> np.ndarray:
        """-sum(g1 * dw0) per tensor, averaged over batches (forward order)."""
        weights = self.model.trainable_weights
        totals = np.zeros(len(weights))
        for images, labels in batches:
            with preserved_state(self.model, self.optimizer):
                start = [w.numpy() for w in weights]
                self.optimizer.apply_gradients(zip(self._gradients(images, labels), weights),
                                               experimental_aggregate_gradients=False)
                deltas = [w.numpy() - s for w, s in zip(weights, start)]
                after = self._gradients(images, labels)
                totals -= [float(np.sum(g.numpy() * d)) for g, d in zip(after, deltas)]
        return totals / max(len(batches), 1)

    def gradient_magnitude(self, batches: Sequence) -> np.ndarray:
        """sum(|g|) per tensor, averaged over batches (ablation)."""
        totals = np.zeros(len(self.model.trainable_weights))
        with preserved_state(self.model, self.optimizer):
            for images, labels in batches:
                totals += [float(tf.reduce_sum(tf.abs(g))) for g in self._gradients(images, labels)]
        return totals / max(len(batches), 1)


@contextlib.contextmanager
def preserved_state(model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer):
    """Run a block, then put every model and optimizer variable back exactly as it was.

    Optimizer slots the block creates are reset to zeros, their value had they been created
    later by training.
    """
    model_variables = list(model.variables) + models.random_states(model)
    model_state = [v.numpy() for v in model_variables]
    optimizer_state = {v.ref(): v.numpy() for v in optimizer.variables()}
    try:
        yield
    finally:
        for variable, value in zip(model_variables, model_state):
            variable.assign(value)
        for variable in optimizer.variables():
            variable.assign(optimizer_state.get(
                variable.ref(), np.zeros(variable.shape, variable.dtype.as_numpy_dtype)))


def normalized(importance: np.ndarray) -> np.ndarray:
    """Importance scaled by max |I| (zeros stay zeros)."""
    peak = float(np.max(np.abs(importance))) if importance.size else 0.0
    return importance / peak if peak > 0 else importance


# --------------------------------------------------------------------- closed-loop time model

class StepTimeController:
    """Turns rho into a backward budget and keeps the achieved step time on target.

    exact mode: the profile predicts a step as T_fp + T_bp(M) and the target is rho * T_full
    (DESIGN.md §3). After each selection has run, the ratio of achieved to predicted step time
    (a running average) corrects the next budget, so throttling, other load or a stale profile
    do not let steps drift off target. `recalibrate` swaps in live T_fp / T_full measurements.
    paper mode: the original's budget, (rho - 1/3) * 3/2 of the backward time, open loop.
    """

    def __init__(self, profile: Dict, rho: float, resolution: int = 1000, rho_mode: str = "exact"):
        self.rho, self.resolution, self.rho_mode = rho, resolution, rho_mode
        self.T_fp_ms, self.T_full_ms = float(profile["T_fp_ms"]), float(profile["T_full_ms"])
        self.t_dy = np.array([t["t_dy_ms"] for t in reversed(profile["tensors"])], float)  # backward order
        self.t_dw = np.array([t["t_dw_ms"] for t in reversed(profile["tensors"])], float)
        self.correction = 1.0
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
        return self.rho * self.T_full_ms

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
        return {"correction": self.correction, "samples": list(self._samples), "warned": self._warned,
                "T_fp_ms": self.T_fp_ms, "T_full_ms": self.T_full_ms,
                "t_dy": self.t_dy.tolist(), "t_dw": self.t_dw.tolist()}

    def load_state(self, state: Dict) -> None:
        self.correction, self._samples, self._warned = state["correction"], list(state["samples"]), state["warned"]
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


# ------------------------------------------------------------------------------------ schemes

@dataclasses.dataclass
class Context:
    """What schemes may use: the model, its optimizer, the run's settings and data."""

    model: tf.keras.Model
    setup: OptimizerSetup
    config: TrainConfig
    steps_per_epoch: int
    train_data: "data.Epochs | data.FixedEpochs"
    profile: Optional[Dict]
    steps: "StepCache"

    def __post_init__(self):
        if isinstance(self.train_data, tf.data.Dataset):
            self.train_data = data.FixedEpochs(self.train_data)


class Scheme:
    """Trains a fixed set of tensors chosen by `initial_mask`; never re-selects."""

    needs_profile = False

    def __init__(self, context: Context):
        self.context = context
        self.mask = self.initial_mask(context.model)
        self.penalty: Optional[Callable[[], tf.Tensor]] = None
        self.overhead: Dict[str, float] = {}  # seconds of each part of re-selecting (probe, dp, ...)

    def initial_mask(self, model: tf.keras.Model) -> np.ndarray:
        return np.ones(len(model.trainable_weights), np.uint8)

    def due(self, step: int) -> bool:
        return False

    def reselect(self, step: int) -> Dict[str, float]:
        return {}

    def observe_step(self, step_ms: float) -> None:
        pass

    def state(self) -> Dict:
        """What a checkpoint keeps of the scheme (to continue exactly where it stopped)."""
        return {"mask": self.mask.tolist(), "overhead": dict(self.overhead)}

    def load_state(self, state: Dict) -> None:
        self.mask = np.array(state["mask"], np.uint8)
        self.overhead = dict(state.get("overhead", {}))

    @contextlib.contextmanager
    def timed(self, part: str):
        """Add the block's wall time to `self.overhead[part]`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.overhead[part] = self.overhead.get(part, 0.0) + time.perf_counter() - start


class FullTraining(Scheme):
    """Every tensor trains."""


class TraditionalTL(Scheme):
    """Only the classifier trains (traditional transfer learning)."""

    def initial_mask(self, model):
        return classifier_mask(model)


class BNPlusBias(Scheme):
    """Normalization gammas/betas, all biases and the classifier train."""

    def initial_mask(self, model):
        return bn_plus_bias_mask(model)


class PruneTraining(Scheme):
    """Every tensor trains under an L1 penalty on kernels (the PruneTrain baseline)."""

    def __init__(self, context: Context):
        super().__init__(context)
        targets = kernels(context.model)
        self.penalty = lambda: PRUNE_PENALTY * tf.add_n([tf.reduce_sum(tf.abs(k)) for k in targets])


class ElasticTraining(Scheme):
    """ElasticTrainer: every `interval` epochs, evaluate importance and solve the selection DP."""

    needs_profile = True

    def __init__(self, context: Context):
        super().__init__(context)
        config = context.config
        self.controller = StepTimeController(context.profile, config.rho, config.resolution, config.rho_mode)
        self.probe = ImportanceProbe(context.model, context.setup.optimizer, context.steps.forward)
        self.interval_steps = max(1, round(config.interval * context.steps_per_epoch))
        self._head = classifier_mask(context.model)
        self.selections = 0
        self.probe_position = 0  # batches of the probe stream used so far

    def initial_mask(self, model):
        return classifier_mask(model)

    def probe_batches(self) -> List:
        """The next batches of the probes' own stream (reproducible, and the same after a resume)."""
        count = self.context.config.probe_batches
        batches = self.context.train_data.probe(self.probe_position, count)
        self.probe_position += count
        return batches

    def importance(self) -> np.ndarray:
        return self.probe.loss_change(self.probe_batches())

    def due(self, step: int) -> bool:
        return step % self.interval_steps == 0

    def observe_step(self, step_ms: float) -> None:
        self.controller.observe(step_ms)

    def reselect(self, step: int) -> Dict[str, float]:
        info = self.controller.end_period(self.mask) if self.selections else {}
        recalibrate = self.context.config.recalibrate
        if recalibrate and self.selections and self.selections % recalibrate == 0:
            with self.timed("recalibrate"):
                info.update(self._recalibrate())
        with self.timed("probe"):  # the first probe also traces and compiles the probe's graph
            importance = normalized(self.importance())
        with self.timed("dp"):
            mask = self.controller.select(importance)
        if not mask.any():  # nothing is worth its time: keep learning in the classifier
            mask = self._head.copy()
        self.mask = mask
        self.selections += 1
        predicted = self.controller.predicted_ms(mask)
        info.update({"elastic/selected_fraction": float(mask.mean()),
                     "elastic/predicted_rho": predicted / self.controller.T_full_ms,
                     "elastic/correction": self.controller.correction})
        return info

    def state(self) -> Dict:
        return {**super().state(), "selections": self.selections, "probe_position": self.probe_position,
                "controller": self.controller.state()}

    def load_state(self, state: Dict) -> None:
        super().load_state(state)
        self.selections, self.probe_position = state["selections"], state["probe_position"]
        self.controller.load_state(state["controller"])

    def _recalibrate(self) -> Dict[str, float]:
        """Time classifier-only, deepest-layer-only and full steps live (state restored after)."""
        model, (images, labels) = self.context.model, self.probe_batches()[0]
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


class StaticTop(Scheme):
    """Freeze-front baseline: the contiguous top of the network that fits ElasticTrainer's
    backward budget at the same rho (and rho mode), chosen once from the profile."""

    needs_profile = True

    def initial_mask(self, model):
        config = self.context.config
        controller = StepTimeController(self.context.profile, config.rho, config.resolution, config.rho_mode)
        top = controller.static_top()
        return top if top.any() else classifier_mask(model)


class ElasticWeightMagnitude(ElasticTraining):
    """Ablation: importance = sum |w| per tensor."""

    def importance(self) -> np.ndarray:
        return np.array([float(tf.reduce_sum(tf.abs(w))) for w in self.context.model.trainable_weights])


class ElasticGradMagnitude(ElasticTraining):
    """Ablation: importance = sum |dL/dw| per tensor on the probe batches."""

    def importance(self) -> np.ndarray:
        return self.probe.gradient_magnitude(self.probe_batches())


SCHEMES: Dict[str, type] = {
    "full_training": FullTraining,
    "traditional_tl_training": TraditionalTL,
    "bn_plus_bias_training": BNPlusBias,
    "prune_training": PruneTraining,
    "static_top_training": StaticTop,
    "elastic_training": ElasticTraining,
    "elastic_training_weight_magnitude": ElasticWeightMagnitude,
    "elastic_training_grad_magnitude": ElasticGradMagnitude,
}


# ------------------------------------------------------------------------------------- loop

class StepCache:
    """Compiled train steps, one per distinct selection, least recently used evicted.

    Re-selecting a mask seen before reuses its traced step (no retracing); a bounded cache
    keeps memory flat however many selections a run makes (README FAQ Q3 of the original).
    """

    def __init__(self, model: tf.keras.Model, optimizer, capacity: int = CACHED_STEPS):
        self.model, self.optimizer, self.capacity = model, optimizer, capacity
        self.penalty: Optional[Callable[[], tf.Tensor]] = None
        self.forward = shared_forward(model)  # traced once for every selection's step
        self._steps: "collections.OrderedDict[bytes, TrainStep]" = collections.OrderedDict()

    def has(self, mask: np.ndarray) -> bool:
        """Whether the step of `mask` is compiled and cached."""
        return np.asarray(mask, np.uint8).tobytes() in self._steps

    def get(self, mask: np.ndarray) -> TrainStep:
        key = np.asarray(mask, np.uint8).tobytes()
        if key in self._steps:
            self._steps.move_to_end(key)
            return self._steps[key]
        step = TrainStep(self.model, self.optimizer, variables_by_mask(self.model, mask), self.penalty, self.forward)
        self._steps[key] = step
        while len(self._steps) > self.capacity:
            self._steps.popitem(last=False)
        return step


class TrainingDiverged(UserError):
    """The loss became NaN or infinite."""


def make_evaluator(model: tf.keras.Model) -> Callable[[tf.data.Dataset], Dict[str, float]]:
    """Test loss and accuracy over a dataset (inference mode)."""

    @tf.function(reduce_retracing=True)
    def batch_sums(images, labels):
        logits = model(images, training=False)
        losses = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1), labels), tf.float32)
        return tf.reduce_sum(losses), tf.reduce_sum(correct), tf.cast(tf.size(labels), tf.float32)

    def evaluate(dataset: tf.data.Dataset) -> Dict[str, float]:
        totals = np.zeros(3)
        for images, labels in dataset:
            totals += [float(v) for v in batch_sums(images, labels)]
        return {"test/classification_loss": totals[0] / totals[2], "test/accuracy": totals[1] / totals[2]}

    return evaluate


def load_profile_for(config: TrainConfig, model: tf.keras.Model) -> Dict:
    """The timing profile a run needs, checked against its model, input, classes, batch and
    BatchNorm mode."""
    command = profile_tables.profile_command(config.model_name, config.input_size, config.num_classes,
                                             config.batch_size, config.bn_mode)
    if not os.path.exists(config.profile):
        raise UserError(f"{config.train_type} needs a timing profile of this model on this device, "
                        f"and {config.profile} does not exist. Make it with: {command}")
    profile = profile_tables.load_profile(config.profile)
    profile_tables.check_profile_matches(
        profile, config.profile, model_name=config.model_name, input_size=config.input_size,
        num_classes=config.num_classes, batch_size=config.batch_size,
        tensor_shapes=[w.shape.as_list() for w in model.trainable_weights], command=command,
        bn_mode=config.bn_mode)
    return profile


class RunInterrupted(UserError):
    """Training stopped on a signal after writing a checkpoint."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.exit_code = 128 + signal_number


class StopRequest:
    """SIGINT/SIGTERM ask the loop to stop after the current step; a second one aborts at once."""

    def __init__(self):
        self.signal_number: Optional[int] = None
        self._previous: Dict[int, object] = {}

    def __enter__(self) -> "StopRequest":
        try:
            for number in (signal.SIGINT, signal.SIGTERM):
                self._previous[number] = signal.signal(number, self._handle)
        except ValueError:  # not the main thread: leave signals alone
            pass
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, frame) -> None:
        if self.signal_number is not None:
            raise KeyboardInterrupt  # the second signal: stop now, no checkpoint
        self.signal_number = number
        print(f"\n{signal.Signals(number).name}: finishing this step and writing a checkpoint "
              f"(press Ctrl-C again to abort at once)", file=sys.stderr, flush=True)


@dataclasses.dataclass
class LoopState:
    """Everything the loop carries from step to step, saved in each checkpoint."""

    epoch: int = 0  # epochs finished
    position: int = 0  # batches done in the current epoch
    step: int = 0
    train_seconds: float = 0.0  # without validation and checkpointing
    evaluation_seconds: float = 0.0
    checkpoint_seconds: float = 0.0
    best_accuracy: float = 0.0
    selection_seconds: List[float] = dataclasses.field(default_factory=list)
    step_ms: List[float] = dataclasses.field(default_factory=list)  # steady steps of finished epochs
    first_call_ms: List[float] = dataclasses.field(default_factory=list)  # compiling calls
    history: List[Dict] = dataclasses.field(default_factory=list)
    masks: List[List[int]] = dataclasses.field(default_factory=list)  # every selection, for the image
    epoch_totals: Dict = dataclasses.field(default_factory=dict)  # the unfinished epoch's sums
    sessions: int = 1
    scheme: Dict = dataclasses.field(default_factory=dict)


def train(config: TrainConfig, model: tf.keras.Model, train_data, test_data: tf.data.Dataset,
          steps_per_epoch: int, outputs: RunOutputs, profile: Optional[Dict] = None,
          resume: bool = False, resume_command: str = "") -> Dict:
    """Train `model` with the scheme `config.train_type`; return the run's summary.

    Wall time (`train_seconds`) counts everything a user waits for except validation and
    checkpoints: steps, data, tensor selection (probe and DP) and compiling each new selection's
    step. Each epoch ends with a test evaluation, TensorBoard scalars, a checkpoint (also every
    `checkpoint_every` steps) and, with save_model, the best weights. `train_data` is a
    data.Epochs (reproducible order per epoch) or a tf.data.Dataset iterated every epoch. With
    `resume`, training continues from the run's latest checkpoint; SIGINT or SIGTERM stops it
    after the current step with a checkpoint, and the error names `resume_command`.
    """
    setup = make_optimizer(config.optimizer, config.learning_rate, config.weight_decay,
                           steps_per_epoch * config.num_epochs)
    setup.optimizer._create_all_weights(model.trainable_weights)  # slots exist, so checkpoints restore them
    steps = StepCache(model, setup.optimizer)
    context = Context(model, setup, config, steps_per_epoch, train_data, profile, steps)
    epochs = context.train_data
    scheme: Scheme = SCHEMES[config.train_type](context)
    steps.penalty = scheme.penalty
    evaluate = make_evaluator(model)
    checkpoints = RunCheckpoints(outputs.run_dir, model, setup.optimizer)
    state = LoopState()
    if resume:
        saved = checkpoints.restore()
        state = LoopState(**{k: v for k, v in saved.items() if k in LoopState.__dataclass_fields__})
        state.sessions += 1
        scheme.load_state(state.scheme)
        outputs.resume(saved["saved_at"], state.step, state.masks)
        logging.info("resuming %s at epoch %d, step %d (%.1f s of training so far)", config.run_name,
                     state.epoch + 1, state.step, state.train_seconds)
    else:
        outputs.save_config(config)
        if not scheme.due(0):  # a fixed selection: show it once
            outputs.selection_mask(0, scheme.mask)
            state.masks.append(scheme.mask.tolist())

    def save_checkpoint() -> str:
        start = time.perf_counter()
        path = checkpoints.save(dataclasses.asdict(dataclasses.replace(state, scheme=scheme.state())))
        state.checkpoint_seconds += time.perf_counter() - start
        return path

    batch = None
    with StopRequest() as stop:
        while state.epoch < config.num_epochs:
            epoch = state.epoch
            totals = state.epoch_totals or {"loss_sum": 0.0, "correct": 0, "seen": 0, "step_ms": [], "outside_ms": []}
            state.epoch_totals = totals
            segment_start = previous_end = time.perf_counter()
            base_seconds = state.train_seconds
            bar = tqdm(epochs.epoch(epoch, skip=state.position), total=steps_per_epoch, initial=state.position,
                       desc=f"epoch {epoch + 1}/{config.num_epochs}", unit="step", dynamic_ncols=True,
                       disable=None)  # no bar when not a terminal
            for images, labels in bar:
                if scheme.due(state.step):
                    start = time.perf_counter()
                    info = scheme.reselect(state.step)
                    state.selection_seconds.append(time.perf_counter() - start)
                    outputs.scalars(state.step, {**info, "elastic/selection_overhead_ms": 1000 * state.selection_seconds[-1]})
                    outputs.selection_mask(state.step, scheme.mask)
                    state.masks.append(scheme.mask.tolist())
                fresh = not steps.has(scheme.mask)  # its first call traces and compiles the step
                trainer = steps.get(scheme.mask)
                start = time.perf_counter()
                totals["outside_ms"].append((start - previous_end) * 1000)
                loss, logits = trainer(images, labels)
                loss_value = float(loss)  # also waits for the step to finish
                step_ms = (time.perf_counter() - start) * 1000
                if not math.isfinite(loss_value):
                    outputs.writer.flush()
                    last_good = os.path.join(outputs.run_dir, "last_good.h5")
                    kept = (f"the last good weights (end of epoch {epoch}) are kept in {last_good}"
                            if epoch and os.path.exists(last_good) else "no epoch finished, so there are no weights to keep")
                    raise TrainingDiverged(f"the loss became {loss_value} at step {state.step + 1} (epoch "
                                           f"{epoch + 1}); training stopped and {kept}. Try a lower "
                                           f"--learning_rate.")
                if fresh:
                    state.first_call_ms.append(step_ms)
                else:
                    scheme.observe_step(step_ms)
                    totals["step_ms"].append(step_ms)
                totals["loss_sum"] += loss_value * len(labels)
                totals["correct"] += int(np.sum(np.argmax(logits.numpy(), axis=-1) == labels.numpy()))
                totals["seen"] += len(labels)
                state.step += 1
                state.position += 1
                batch = (images, labels)
                bar.set_postfix(loss=f"{totals['loss_sum'] / totals['seen']:.3f}",
                                acc=f"{totals['correct'] / totals['seen']:.3f}", refresh=False)
                state.train_seconds = base_seconds + time.perf_counter() - segment_start
                periodic = (config.checkpoint_every and state.step % config.checkpoint_every == 0
                            and state.position < steps_per_epoch)  # the epoch's end has its own
                if periodic or stop.signal_number:  # on a signal, before the epoch's evaluation
                    outputs.writer.flush()
                    paused = time.perf_counter()
                    path = save_checkpoint()
                    if stop.signal_number:
                        bar.close()
                        raise RunInterrupted(
                            f"stopped by {signal.Signals(stop.signal_number).name} at step {state.step} (epoch "
                            f"{epoch + 1}, {state.position}/{steps_per_epoch}); checkpoint {path}. Continue "
                            f"with: {resume_command}", stop.signal_number)
                    segment_start += time.perf_counter() - paused  # checkpointing is not training time
                previous_end = time.perf_counter()
            state.train_seconds = base_seconds + time.perf_counter() - segment_start  # with the epoch's tail
            bar.close()
            state.step_ms += totals["step_ms"]
            evaluation_start = time.perf_counter()
            metrics = evaluate(test_data)
            state.evaluation_seconds += time.perf_counter() - evaluation_start
            state.best_accuracy = max(state.best_accuracy, metrics["test/accuracy"])
            if config.save_model and metrics["test/accuracy"] >= state.best_accuracy:
                outputs.save_best(model)
            outputs.checkpoint(model)
            seen = max(totals["seen"], 1)
            state.history.append({"epoch": epoch + 1, "train_seconds": state.train_seconds,
                                  "test_accuracy": metrics["test/accuracy"], "train_loss": totals["loss_sum"] / seen})
            outputs.scalars(state.step, {
                "train/accuracy": totals["correct"] / seen, "train/classification_loss": totals["loss_sum"] / seen,
                "train/learning_rate": float(setup.learning_rate(state.step)),
                "time/step_ms": float(np.median(totals["step_ms"])) if totals["step_ms"] else 0.0,
                "time/between_steps_ms": float(np.median(totals["outside_ms"])) if totals["outside_ms"] else 0.0,
                "time/compile_seconds": compile_seconds(state.first_call_ms, state.step_ms),
                "time/selection_seconds": sum(state.selection_seconds),
                "time/evaluation_seconds": state.evaluation_seconds,
                "time/train_seconds": state.train_seconds, **metrics})
            logging.info("epoch %d/%d: test accuracy %.2f%% (best %.2f%%), %.1f s of training",
                         epoch + 1, config.num_epochs, 100 * metrics["test/accuracy"], 100 * state.best_accuracy,
                         state.train_seconds)
            state.epoch, state.position, state.epoch_totals = epoch + 1, 0, {}
            save_checkpoint()
            if stop.signal_number and state.epoch < config.num_epochs:
                raise RunInterrupted(
                    f"stopped by {signal.Signals(stop.signal_number).name} at the end of epoch {state.epoch}; "
                    f"checkpoint written. Continue with: {resume_command}", stop.signal_number)
    reference = {}
    if batch is None:  # resumed after the last epoch's checkpoint: time the reference on a fresh batch
        batch = next(iter(epochs.epoch(0)))
    if config.reference_steps and not scheme.mask.all():
        reference = measure_reference(steps, setup.optimizer, scheme.mask, batch, config.reference_steps)
    summary = summarize(config, profile, state.best_accuracy, state.train_seconds, state.selection_seconds,
                        state.step_ms, compile_seconds(state.first_call_ms, state.step_ms),
                        state.evaluation_seconds, state.history, reference)
    summary.update(checkpoint_seconds=state.checkpoint_seconds, sessions=state.sessions,
                   selection_parts={part: scheme.overhead.get(part, 0.0) for part in ("probe", "dp", "recalibrate")})
    return summary


def compile_seconds(first_call_ms: Sequence[float], step_ms: Sequence[float]) -> float:
    """Time the first calls of new selections' steps took beyond an ordinary step (tracing and
    compiling), in seconds."""
    typical = float(np.median(step_ms)) if len(step_ms) else 0.0
    return sum(max(0.0, first - typical) for first in first_call_ms) / 1000


def measure_reference(steps: "StepCache", optimizer, mask: np.ndarray, batch, count: int) -> Dict[str, float]:
    """Time full-training steps against steps of `mask` now, in this process, interleaved in
    blocks (model and optimizer state restored), so the run's step times are compared with a
    full step under the same conditions rather than only with the (older) profile."""
    images, labels = batch
    start = time.perf_counter()
    full, current = steps.get(np.ones_like(mask)), steps.get(mask)
    with preserved_state(steps.model, optimizer):
        for step in (full, current, full, current):  # compile (if new) and warm up
            step(images, labels)[0].numpy()
        full_ms, mask_ms = wall_time_samples(
            [lambda s=s: s(images, labels)[0].numpy() for s in (full, current)], count)
    return {"reference_full_step_ms": float(np.median(full_ms)),
            "reference_selection_step_ms": float(np.median(mask_ms)),
            "reference_seconds": time.perf_counter() - start}


def summarize(config: TrainConfig, profile: Optional[Dict], best_accuracy: float, train_seconds: float,
              selection_seconds: Sequence[float], step_ms: Sequence[float], compile_s: float = 0.0,
              evaluation_seconds: float = 0.0, history: Sequence[Dict] = (),
              reference: Optional[Dict[str, float]] = None) -> Dict:
    """The run's summary: accuracy, wall time and where it went, and step time relative to a
    full step (the profile's, and one measured live at the end of the run when `reference`)."""
    median_ms = float(np.median(step_ms)) if len(step_ms) else float("nan")
    full_ms = float(profile["T_full_ms"]) if profile else float("nan")
    scheme = SCHEMES[config.train_type]
    if config.train_type == "full_training":
        target = 1.0
    else:  # paper mode budgets a share of the backward pass, not a step time
        target = config.rho if scheme.needs_profile and config.rho_mode == "exact" else float("nan")
    reference = dict(reference or {})
    if "reference_full_step_ms" in reference:  # final selection vs full, timed together
        live = reference["reference_selection_step_ms"] / reference["reference_full_step_ms"]
    else:
        live = 1.0 if config.train_type == "full_training" else float("nan")
    return {"run_name": config.run_name, "train_type": config.train_type,
            "rho": config.rho if scheme.needs_profile else None,  # others ignore rho
            "rho_mode": config.rho_mode if scheme.needs_profile else None,
            "bn_mode": config.bn_mode, "seed": config.seed,
            "best_test_accuracy": best_accuracy, "final_test_accuracy": history[-1]["test_accuracy"] if history else 0.0,
            "train_time_hours": train_seconds / 3600,
            "train_seconds": train_seconds, "median_step_ms": median_ms,
            "step_time_ratio_achieved": median_ms / full_ms,
            "step_time_ratio_live": live,
            "step_time_ratio_target": target,
            "selection_seconds": list(selection_seconds),
            "selection_overhead_share": sum(selection_seconds) / train_seconds if train_seconds else 0.0,
            "compile_seconds": compile_s,
            "compile_share": compile_s / train_seconds if train_seconds else 0.0,
            "evaluation_seconds": evaluation_seconds,
            **reference, "history": list(history)}
