"""What every scheme shares: the context it may use, the base class, and variable roles."""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

import data
import models
from train_step import OptimizerSetup

if TYPE_CHECKING:  # the loop's types, for annotations only (kept out of the run-time imports)
    from config import TrainConfig
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

    def __post_init__(self):
        if isinstance(self.train_data, tf.data.Dataset):
            self.train_data = data.FixedEpochs(self.train_data)


class Scheme:
    """Trains a fixed set of tensors chosen by `initial_mask`; never re-selects."""

    needs_profile = False
    lite_residual = False  # the model must be built with TinyTL's lite residual branches
    overhead_parts: tuple = ()  # the parts of re-selecting whose seconds the summary reports

    def __init__(self, context: Context):
        self.context = context
        self.mask = self.initial_mask(context.model)
        self.penalty: Optional[Callable[[], tf.Tensor]] = None
        self.overhead: Dict[str, float] = {part: 0.0 for part in self.overhead_parts}  # seconds

    @classmethod
    def check(cls, model: tf.keras.Model, config: "TrainConfig") -> None:
        """UserError when the scheme cannot run on this model with these flags (called before the
        run writes anything)."""

    def initial_mask(self, model: tf.keras.Model) -> np.ndarray:
        return np.ones(len(model.trainable_weights), np.uint8)

    def due(self, step: int) -> bool:
        return False

    def reselect(self, step: int) -> Dict[str, float]:
        return {}

    def observe_step(self, step_ms: float) -> None:
        pass

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
