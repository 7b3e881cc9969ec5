"""The compiled training step shared by training, profiling and the profiler's validation.

One `TrainStep` trains one fixed list of variables. Gradients are taken only for those
variables: the tape watches just them, so the traced graph stops at the deepest selected
tensor instead of computing (and pruning) gradient ops for the whole model.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import tensorflow as tf
import tensorflow_addons as tfa

import models

MOMENTUM = 0.9
OPTIMIZERS = ("sgd", "adam")


@dataclasses.dataclass
class OptimizerSetup:
    """An optimizer and the schedules it follows (read them to log the current values)."""

    optimizer: tf.keras.optimizers.legacy.Optimizer
    learning_rate: tf.keras.optimizers.schedules.LearningRateSchedule
    weight_decay: Optional[tf.keras.optimizers.schedules.LearningRateSchedule]

    def plan(self, total_steps: int) -> None:
        """End the schedules at `total_steps` from now on (a run under a deadline; steps already
        taken keep the rates they had)."""
        for schedule in (self.learning_rate, self.weight_decay):
            if schedule is not None:
                schedule.horizon.assign(float(max(int(total_steps), 1)))


class PlannedCosineDecay(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Keras's CosineDecay (alpha 0, no warm-up) whose length is a variable: a deadline's plan can
    move the schedule's end while compiled steps read it."""

    def __init__(self, initial: float, total_steps: int):
        self.initial = initial
        self.horizon = tf.Variable(float(max(int(total_steps), 1)), trainable=False, dtype=tf.float32)

    def __call__(self, step):
        fraction = tf.minimum(tf.cast(step, tf.float32), self.horizon) / self.horizon
        return self.initial * 0.5 * (1.0 + tf.cos(np.pi * fraction))

    def get_config(self) -> Dict:
        return {"initial": self.initial, "total_steps": int(self.horizon.numpy())}


def make_optimizer(name: str, learning_rate: float, weight_decay: float,
                   total_steps: int, planned: bool = False) -> OptimizerSetup:
    """The paper's optimizer, `name` "sgd": tensorflow-addons SGDW (momentum 0.9), the learning rate
    and the decoupled decay lr * weight_decay both cosine-decayed to zero over `total_steps`;
    "adam" (for ViT) ignores `weight_decay`. `planned`: schedules whose end OptimizerSetup.plan
    moves (a run under a deadline)."""
    steps = max(int(total_steps), 1)
    cosine = PlannedCosineDecay if planned else tf.keras.optimizers.schedules.CosineDecay
    lr_schedule = cosine(learning_rate, steps)
    if name == "sgd":
        wd_schedule = cosine(learning_rate * weight_decay, steps)
        optimizer = tfa.optimizers.SGDW(weight_decay=wd_schedule, learning_rate=lr_schedule,
                                        momentum=MOMENTUM)
        return OptimizerSetup(optimizer, lr_schedule, wd_schedule)
    if name == "adam":
        return OptimizerSetup(tf.keras.optimizers.legacy.Adam(lr_schedule), lr_schedule, None)
    raise ValueError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}")


def classification_loss(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Mean sparse categorical cross-entropy on logits."""
    return tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
        labels, logits, from_logits=True))


Forward = Callable[[tf.Tensor], tf.Tensor]


def shared_forward(model: tf.keras.Model) -> Forward:
    """The model's training-mode forward pass as one tf.function for every step of a run: the model
    is traced once per run, not once per selection, and TensorFlow inlines it into each step and
    prunes unneeded gradients, so a step runs as if traced whole (docs/benchmarks/compile.md)."""
    return tf.function(lambda images: model(images, training=True), autograph=False)


def eager_gradients(model: tf.keras.Model, forward: Optional[Forward] = None) -> Callable:
    """`full_gradients`' pass run eagerly (the model's own call unless `forward` is given): nothing
    to trace or compile, each call slower (Python dispatches every layer's ops). The same gradients
    within float rounding (the graph's fused kernels round differently)."""
    forward = forward or (lambda images: model(images, training=True))

    def gradients(images: tf.Tensor, labels: tf.Tensor) -> List[tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(model.trainable_weights)
            loss = classification_loss(labels, forward(images))
        return tape.gradient(loss, model.trainable_weights)

    return gradients


def full_gradients(model: tf.keras.Model, forward: Forward, input_signature: Optional[Sequence] = None) -> Callable:
    """A tf.function: the gradients of every trainable tensor on one batch, no update (the
    importance probe's). The profiler times it too (`T_grad_ms`), so that training can tell how
    much faster or slower the machine runs now than when it was profiled. With `input_signature`
    (e.g. a batch dimension of None) it is traced once for every batch that fits it."""
    return tf.function(eager_gradients(model, forward), input_signature=input_signature, autograph=False)


class TrainStep:
    """A tf.function that trains `variables` on one batch and returns (loss, logits).

    With `forward` (see shared_forward) the model's forward pass is that shared function;
    without, the step traces the model itself. Tracing records the graph names of the loss and
    of each gradient in `self.graph_names`; the profiler reads them to map the step's ops to
    tensors, so it uses steps traced in one piece.
    """

    def __init__(self, model: tf.keras.Model, optimizer: tf.keras.optimizers.legacy.Optimizer,
                 variables: Sequence[tf.Variable], penalty: Optional[Callable[[], tf.Tensor]] = None,
                 forward: Optional[Forward] = None):
        self.model = model
        self.optimizer = optimizer
        self.variables = list(variables)
        self.penalty = penalty
        self.forward = forward
        self.graph_names: Dict[str, object] = {}
        self.function = tf.function(self._step, autograph=False)

    def _step(self, images: tf.Tensor, labels: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(self.variables)
            logits = self.forward(images) if self.forward is not None else self.model(images, training=True)
            loss = classification_loss(labels, logits)
            objective = loss + self.penalty() if self.penalty is not None else loss
        gradients = tape.gradient(objective, self.variables)
        self.graph_names = {"loss": objective.name, "gradients": [_tensor_name(g) for g in gradients]}
        # Keras's legacy optimizers all-reduce gradients across replicas through a
        # tf.custom_gradient even on one device. In a tf.function, custom_gradient registers its
        # gradient function in TensorFlow's global registry for good, and that function keeps
        # the traced graph alive: each compiled step would leak its graph (~8 MB for
        # MobileNetV2). Without a multi-device strategy the all-reduce is a no-op: skip it.
        self.optimizer.apply_gradients(
            [(g, v) for g, v in zip(gradients, self.variables) if g is not None],
            experimental_aggregate_gradients=False)
        return loss, logits

    def __call__(self, images: tf.Tensor, labels: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        return self.function(images, labels)


def _tensor_name(gradient) -> Optional[str]:
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        return gradient.values.name
    return gradient.name


def make_evaluator(model: tf.keras.Model) -> Callable[..., Dict[str, float]]:
    """Loss and accuracy over a dataset (inference mode), as `<prefix>/classification_loss` and
    `<prefix>/accuracy` (prefix "test" unless given)."""

    @tf.function(reduce_retracing=True, autograph=False)
    def batch_sums(images, labels):
        logits = model(images, training=False)
        losses = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1), labels), tf.float32)
        return tf.reduce_sum(losses), tf.reduce_sum(correct), tf.cast(tf.size(labels), tf.float32)

    def evaluate(dataset: tf.data.Dataset, prefix: str = "test") -> Dict[str, float]:
        totals = np.zeros(3)
        for images, labels in dataset:
            totals += [float(v) for v in batch_sums(images, labels)]
        return {f"{prefix}/classification_loss": totals[0] / totals[2], f"{prefix}/accuracy": totals[1] / totals[2]}

    return evaluate


def forward_function(model: tf.keras.Model) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """A tf.function running the training-mode forward pass and the loss (no gradients)."""

    @tf.function(autograph=False)
    def forward(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return classification_loss(labels, model(images, training=True))

    return forward


def variables_by_mask(model: tf.keras.Model, mask: Sequence[int]) -> List[tf.Variable]:
    """The trainable variables selected by a 0/1 mask in model.trainable_weights order."""
    weights = model.trainable_weights
    if len(mask) != len(weights):
        raise ValueError(f"mask has {len(mask)} entries, the model {len(weights)} trainable tensors")
    return [w for w, keep in zip(weights, mask) if keep]


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


CACHED_STEPS = 8  # compiled train steps kept (one per distinct selection)


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
