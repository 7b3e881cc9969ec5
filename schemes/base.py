"""What every scheme shares: the context it may use, the base class, and variable roles."""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

import data
import models
from train_step import OptimizerSetup

if TYPE_CHECKING:  # the loop's types, for annotations only (kept out of the run-time imports)
    from elastic_trainer.config import TrainConfig
    from schemes.time_budget import StepTimeController
    from train_step import StepCache

NORMALIZATION_LAYERS = (tf.keras.layers.BatchNormalization, tf.keras.layers.LayerNormalization,
                        tf.keras.layers.GroupNormalization)


def classifier_mask(model: tf.keras.Model) -> np.ndarray:
    """Tensors of the layer nearest the loss (the classifier)."""
    return np.isin(np.arange(len(model.trainable_weights)), models.head_indices(model)).astype(np.uint8)


def layers_mask(model: tf.keras.Model, layers: Sequence[tf.keras.layers.Layer]) -> np.ndarray:
    """Every trainable tensor of `layers`, and the classifier."""
    chosen = {id(variable) for layer in layers for variable in layer.trainable_weights}
    in_layers = np.array([id(variable) in chosen for variable in model.trainable_weights], np.uint8)
    return in_layers | classifier_mask(model)


def bn_plus_bias_mask(model: tf.keras.Model) -> np.ndarray:
    """Normalization gammas/betas, every layer's bias, and the classifier."""
    roles = [isinstance(owner, NORMALIZATION_LAYERS) or variable is getattr(owner, "bias", None)
             for owner, variable in zip(models.owner_layers(model), model.trainable_weights)]
    return np.array(roles, np.uint8) | classifier_mask(model)


def bias_mask(model: tf.keras.Model) -> np.ndarray:
    """Every additive bias: layers' biases and normalization betas (not the gammas), and the
    classifier (TinyTL's bias-only update)."""
    roles = [any(variable is getattr(owner, name, None) for name in ("bias", "beta"))
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
    validation: Optional[tf.data.Dataset] = None  # the run's validation split, when it has one

    def __post_init__(self):
        if isinstance(self.train_data, tf.data.Dataset):
            self.train_data = data.FixedEpochs(self.train_data)


REGISTRY: Dict[str, type] = {}  # --train_type -> scheme class, filled as scheme modules are imported


class Scheme:
    """Trains a fixed set of tensors chosen by `initial_mask`; never re-selects.

    A scheme is one file in schemes/: a subclass naming its `train_type` registers on import and
    answers what main.py, the loop and the summary ask of it (flags, checks, run name, targets)."""

    train_type: Optional[str] = None  # the --train_type that runs it (None: not runnable, a base)
    needs_profile = False
    lite_residual = False  # the model must be built with TinyTL's lite residual branches
    accepts_memory_budget = False  # its selection can keep a step within --memory_budget_mb
    full_step = False  # its step is the full step that step-time ratios divide by
    reselects = False  # it selects again every --interval epochs (so the run's interval applies to it)
    flag_defaults: Dict[str, object] = {}  # shared flags whose default differs under this scheme
    overhead_parts: tuple = ()  # the parts of re-selecting whose seconds the summary reports
    once_parts: tuple = ("probe_trace",)  # those of them only a run's first selection pays (a deadline prices them once)
    session_parts: tuple = ("probe_trace",)  # those a resumed process pays again at its first selection
    last_importance: Optional[np.ndarray] = None  # what the last selection ranked tensors by (logged), if anything

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("train_type")
        if name is not None:
            if name in REGISTRY and REGISTRY[name] is not cls:
                raise TypeError(f"two schemes are named {name!r}: {REGISTRY[name].__qualname__} and {cls.__qualname__}")
            REGISTRY[name] = cls

    @classmethod
    def add_flags(cls, flag: Callable) -> None:
        """Declare the flags only this scheme reads with `flag` (argparse's add_argument, in the scheme's
        own group), each with default None (not given). Their values reach the scheme as the TrainConfig
        field of that name, else as `config.scheme_options[dest]`; other schemes refuse them."""

    @classmethod
    def check_flags(cls, args) -> None:
        """UserError for flags this scheme cannot run with (main.py's parsed arguments, after
        `flag_defaults` filled in what was not given); called before anything is written."""

    @classmethod
    def run_name_parts(cls, args) -> List[str]:
        """What the default run name adds for this scheme's own flags (e.g. blocks0-4)."""
        return []

    @classmethod
    def step_ratio_target(cls, config: "TrainConfig") -> float:
        """The step time this scheme aims at, as a fraction of a full step (nan: it aims at none)."""
        if cls.full_step:
            return 1.0
        if cls.needs_profile and config.rho_mode == "exact":
            return config.rho
        return float("nan")  # paper mode budgets a share of the backward pass, not a step time

    @property
    def memory_budgeted(self) -> bool:
        """Whether this run selects under a memory budget (the loop then checks the budget first)."""
        return False

    def check_memory(self, mask: np.ndarray) -> None:
        """UserError when a step training `mask` cannot fit the memory budget (only asked when
        `memory_budgeted`)."""

    def check_memory_budget(self, evaluation: Sequence[tf.data.Dataset] = ()) -> None:
        """Under a memory budget, refuse one that cannot pay for a classifier-only step before the
        run writes anything. What the allocator holds is read as it will be during training: with
        the input pipeline's buffers filled (an epoch's and the probes' shuffle buffers hold the
        whole training split when it is cached) and the `evaluation` datasets' in-memory caches made
        (a pass over each; after the first epoch's evaluation they stay, and would otherwise push
        the first selection's steps over the budget by their size)."""
        if not self.memory_budgeted:
            return
        for dataset in evaluation:
            for _ in dataset:
                pass
        batches = iter(self.context.train_data.epoch(0))
        next(batches)
        self.context.train_data.probe(0, 1)
        self.check_memory(classifier_mask(self.context.model))
        del batches

    def __init__(self, context: Context):
        self.context = context
        self.mask = self.initial_mask(context.model)
        self.penalty: Optional[Callable[[], tf.Tensor]] = None
        self.overhead: Dict[str, float] = {part: 0.0 for part in self.overhead_parts}  # seconds
        self.facts: Dict[str, object] = {}  # what the scheme decided that the summary records (e.g. "probe")

    @classmethod
    def check(cls, model: tf.keras.Model, config: "TrainConfig") -> None:
        """UserError when the scheme cannot run on this model with these flags (called before the
        run writes anything)."""

    @classmethod
    def check_data(cls, config: "TrainConfig", steps_per_epoch: int, validation_images: Optional[int]) -> None:
        """UserError when the scheme cannot run on this data: `steps_per_epoch` full training
        batches and `validation_images` in the validation split (None: no validation split); called
        once the data is ready, before the run writes anything."""

    def initial_mask(self, model: tf.keras.Model) -> np.ndarray:
        return np.ones(len(model.trainable_weights), np.uint8)

    def due(self, step: int) -> bool:
        return False

    def reselect(self, step: int) -> Dict[str, float]:
        return {}

    def timed_reselect(self, step: int, memory_selections: Sequence[Dict] = ()
                       ) -> Tuple[Dict[str, float], float, Dict[str, float]]:
        """reselect(step) after observe_memory of the last selection's peaks (`memory_selections`,
        the loop's), timed: its scalars, its seconds, and the seconds it added to each of the
        scheme's overhead parts (those it added to)."""
        if memory_selections:
            self.observe_memory(memory_selections[-1])
        start, before = time.perf_counter(), dict(self.overhead)
        info = self.reselect(step)
        seconds = time.perf_counter() - start
        return info, seconds, {part: spent - before.get(part, 0.0) for part, spent in self.overhead.items()
                               if spent - before.get(part, 0.0) > 0}

    def planned_selections(self) -> int:
        """Selections a run makes under a deadline: one when the scheme selects at its first step,
        none when its selection is fixed (a scheme that re-selects spreads its own over the plan)."""
        return int(self.due(0))

    def plan(self, total_steps: int) -> None:
        """Under a deadline: the steps the run now plans to take in all."""

    @classmethod
    def selection_calls(cls, config: "TrainConfig") -> Tuple[int, int]:
        """The probe's gradient calls at every selection, and those the first selection alone
        makes (a deadline's first plan prices selections with them)."""
        return 0, 0

    def step_mask(self, step: int) -> np.ndarray:
        """The selection the loop's next step (number `step`) trains: the period's, unless the
        scheme rotates selections within a period."""
        return self.mask

    def observe_step(self, step_ms: float) -> None:
        """A steady step's measured time (the step `step_mask` last handed out; not a compiling call)."""

    def typical_step_ms(self, step_ms: Sequence[float]) -> float:
        """The run's typical step time from its steady steps' times: their median (a scheme whose
        steps come in several sizes weights each size's median by its share instead)."""
        return float(np.median(step_ms)) if len(step_ms) else float("nan")

    def step_mix(self) -> List[Tuple[np.ndarray, float]]:
        """The selections the run's steps train now and each one's share of the steps, which the
        run's live reference times against a full step (the final selection alone here)."""
        return [(self.mask, 1.0)]

    def observe_memory(self, selection: Dict) -> None:
        """The last selection's predicted and measured allocator peaks (train.Loop's memory_selections entry)."""

    def state(self) -> Dict:
        """What a checkpoint keeps of the scheme (to continue exactly where it stopped)."""
        return {"mask": self.mask.tolist(), "overhead": dict(self.overhead)}

    def load_state(self, state: Dict) -> None:
        self.mask = np.array(state["mask"], np.uint8)
        self.overhead.update(state.get("overhead", {}))

    @contextlib.contextmanager
    def timed(self, part: str):
        """Add the block's wall time to `self.overhead[part]`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.overhead[part] = self.overhead.get(part, 0.0) + time.perf_counter() - start


class BudgetedScheme(Scheme):
    """A scheme whose selection fits a time budget, and a memory budget when one is given, through
    its step-time controller (`self.controller`, made here from the run's profile and flags)."""

    needs_profile = True
    accepts_memory_budget = True

    def __init__(self, context: Context):
        super().__init__(context)
        self.controller = self.make_controller(context)
        self.probe_position = 0  # batches of the probes' own stream taken so far

    @classmethod
    def make_controller(cls, context: Context) -> "StepTimeController":
        """The step-time controller of the user's budget (rho, rho_mode, memory), checked feasible."""
        from schemes.time_budget import StepTimeController  # (time_budget sits beside this module)

        config = context.config
        return StepTimeController(context.profile, config.rho, config.resolution, config.rho_mode,
                                  config.memory_budget_mb)

    def probe_batches(self, count: int) -> List:
        """The next `count` batches of the probes' own stream (reproducible, the same after a resume)."""
        batches = self.context.train_data.probe(self.probe_position, count)
        self.probe_position += count
        return batches

    @property
    def memory_budgeted(self) -> bool:
        return self.controller.memory is not None

    def check_memory(self, mask: np.ndarray) -> None:
        self.controller.check_memory(mask)


def interval_steps(interval: float, steps_per_epoch: int) -> int:
    """Steps between two selections: `interval` epochs, at least one step."""
    return max(1, round(interval * steps_per_epoch))
