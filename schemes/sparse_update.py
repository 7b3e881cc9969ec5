"""Sparse update (Lin et al., "On-Device Training Under 256KB Memory", NeurIPS 2022) as a scheme:
a static selection made once, at step 0, by contribution analysis, under --rho's time budget.

Contribution analysis fine-tunes parts of the backbone's blocks (gradient_filter.blocks) with the
classifier and scores each trial by how much it lowers the loss on held-out batches, against the
classifier alone: each block's weights (kernels, normalization gammas), and the biases (biases,
normalization betas) of the last k blocks, k = 1, 2, 4, ... all. A block's weights get their
trial's gain, the biases between two bias depths what the deeper trial adds. The DP maximises
these gains under the budget: only how importance is measured differs from ElasticTrainer.

Each trial starts from the same restored state and runs TRIAL_STEPS steps of masked plain SGD (one
compiled step for every trial; step size the learning rate over (1 - momentum), where momentum SGD
settles) on TRIAL_BATCHES probe batches, scored by the mean loss on the next HELD_OUT_BATCHES.
Deterministic for a seed. Trials take full gradients, so the analysis peaks at a full step's
memory, reported apart (`measured_selection_peak_mb`); --memory_budget_mb bounds the selected steps.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import tensorflow as tf

import models
from models import gradient_filter
from schemes.base import BudgetedScheme, Context, bias_mask, classifier_mask
from schemes.probe import memory_info, normalized
from train_step import MOMENTUM, classification_loss, preserved_state

TRIAL_STEPS = 6
TRIAL_BATCHES = 2
HELD_OUT_BATCHES = 4


def block_tensors(model: tf.keras.Model) -> List[Dict[str, List[int]]]:
    """For each backbone block (forward order), the indices (model.trainable_weights order) of its
    weights and of its biases, without the classifier's."""
    head = set(models.head_indices(model))
    biases_of_model = bias_mask(model)
    index = {id(variable): k for k, variable in enumerate(model.trainable_weights)}
    groups = []
    for _, layers in gradient_filter.blocks(model):
        weights, biases = [], []
        for layer in layers:
            for variable in layer.trainable_weights:
                k = index.get(id(variable))
                if k is None or k in head:
                    continue
                (biases if biases_of_model[k] else weights).append(k)
        if weights or biases:
            groups.append({"weights": weights, "biases": biases})
    return groups


def bias_depths(blocks: int) -> List[int]:
    """Bias trials' depths in blocks from the top: 1, 2, 4, ... and all of them."""
    depths, depth = [], 1
    while depth < blocks:
        depths.append(depth)
        depth *= 2
    return depths + [blocks]


class ContributionAnalysis:
    """Trial fine-tunings of masked parts of a model, each from the same state."""

    def __init__(self, model: tf.keras.Model, optimizer, learning_rate: float, forward):
        self.model, self.optimizer = model, optimizer
        self.step_size = learning_rate / (1.0 - MOMENTUM)
        self.forward = forward

        @tf.function
        def trial_step(images, labels, mask):
            weights = self.model.trainable_weights
            with tf.GradientTape() as tape:
                loss = classification_loss(labels, self.forward(images))
            for k, (variable, gradient) in enumerate(zip(weights, tape.gradient(loss, weights))):
                if gradient is not None:
                    variable.assign_sub(self.step_size * mask[k] * gradient)

        @tf.function
        def held_out_loss(images, labels):
            return classification_loss(labels, self.model(images, training=False))

        self._trial_step, self._held_out_loss = trial_step, held_out_loss

    def loss_after(self, mask: np.ndarray, train: List, held_out: List) -> float:
        """Held-out loss after TRIAL_STEPS masked steps on `train` (state restored after)."""
        mask_tensor = tf.constant(mask, tf.float32)
        with preserved_state(self.model, self.optimizer):
            for step in range(TRIAL_STEPS):
                images, labels = train[step % len(train)]
                self._trial_step(images, labels, mask_tensor)
            return float(np.mean([float(self._held_out_loss(*batch)) for batch in held_out]))


class SparseUpdate(BudgetedScheme):
    """A static selection by contribution analysis under the --rho budget (made at step 0)."""

    train_type = "sparse_update_training"
    overhead_parts = ("analysis", "dp")

    def __init__(self, context: Context):
        super().__init__(context)
        self.selected = False
        self.contributions: Dict[str, List[float]] = {}

    def initial_mask(self, model):
        return classifier_mask(model)

    def due(self, step: int) -> bool:
        return not self.selected

    def planned_selections(self) -> int:
        return 1  # its one analysis, made or not (a resumed run has made it)

    def importance(self) -> np.ndarray:
        model, head = self.context.model, classifier_mask(self.context.model)
        batches = self.context.train_data.probe(0, TRIAL_BATCHES + HELD_OUT_BATCHES)
        train, held_out = batches[:TRIAL_BATCHES], batches[TRIAL_BATCHES:]
        analysis = ContributionAnalysis(model, self.context.setup.optimizer, self.context.config.learning_rate,
                                        self.context.steps.forward)
        groups = block_tensors(model)
        baseline = analysis.loss_after(head, train, held_out)

        def gain(indices: List[int]) -> float:
            mask = head.copy()
            mask[indices] = 1
            return baseline - analysis.loss_after(mask, train, held_out)

        importance = np.zeros(len(head))
        weight_gains = [gain(group["weights"]) if group["weights"] else 0.0 for group in groups]
        for group, value in zip(groups, weight_gains):
            importance[group["weights"]] = max(value, 0.0) / max(len(group["weights"]), 1)
        depths = bias_depths(len(groups))
        bias_gains, previous_depth, previous_gain = [], 0, 0.0
        for depth in depths:
            segment = [k for group in groups[len(groups) - depth:len(groups) - previous_depth] for k in group["biases"]]
            value = gain([k for group in groups[len(groups) - depth:] for k in group["biases"]])
            if segment:
                importance[segment] = max(value - previous_gain, 0.0) / len(segment)
            bias_gains.append(value)
            previous_depth, previous_gain = depth, max(previous_gain, value)
        self.contributions = {"weights": weight_gains, "bias_depths": depths, "biases": bias_gains,
                              "baseline_loss": [baseline]}
        importance[head.astype(bool)] = max(float(importance.max()), 1.0)  # the classifier always trains
        return importance

    def reselect(self, step: int) -> Dict[str, float]:
        with self.timed("analysis"):
            importance = normalized(self.importance())
        with self.timed("dp"):
            self.mask = self.controller.select(importance) | classifier_mask(self.context.model)
        self.selected = True
        return {"selection/trained_fraction": float(self.mask.mean()),
                "selection/predicted_ratio": self.controller.predicted_ms(self.mask) / self.controller.T_full_ms,
                **memory_info(self.controller, self.mask)}

    def state(self) -> Dict:
        return {**super().state(), "selected": self.selected, "contributions": self.contributions}

    def load_state(self, state: Dict) -> None:
        super().load_state(state)
        self.selected, self.contributions = state["selected"], state["contributions"]
