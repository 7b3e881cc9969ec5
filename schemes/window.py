"""ElasticTrainer whose selections are structured: a contiguous range of blocks trained whole, the
cheap tensors above it, and the classifier (issue 34's second candidate; ElasticTrainer itself
stays as it is in elastic.py).

ElasticTrainer may select any set of tensors, and pays the backward chain down to the deepest one
it picks: on embedded_parts at rho 0.7 its later selections buy a few deep tensors (BatchNorm
scales, single projections) with 80-90 % of the backward time they pay for, and train about half
of the weight-gradient time above them (docs/benchmarks/regime_and_depth.md, "The frontier on a
design draw"). Here a selection is the classifier, every tensor of blocks FIRST..STOP-1 (the
blocks --block_range counts), and any BatchNorm scale or shift or bias above block STOP-1's
deepest tensor, each of which costs only its weight gradient there. Of those that fit the budget,
the one with the most total importance wins (selection_solver_DP.select_window). Everything else
is ElasticTrainer's: the probe and its cost, the selections' schedule, the budget rho in both
modes, the profile's times and the closed loop on measured steps.

HeldOutWindowElasticTraining sums the held-out importance of heldout.py over the same structure.
"""
from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

from models import gradient_filter
from schemes.base import Context, bn_plus_bias_mask
from schemes.elastic import ElasticTraining
from schemes.gain_stage import block_of_tensors
from schemes.heldout import HeldOutElasticTraining
from utils import UserError


class WindowElasticTraining(ElasticTraining):
    """ElasticTrainer's importance and budget; selections are a window of whole blocks, the cheap
    tensors above it and the classifier."""

    train_type = "elastic_window_training"
    candidate = True
    accepts_memory_budget = False

    def __init__(self, context: Context):
        super().__init__(context)
        model = context.model
        self.block_of = block_of_tensors(model)
        self.cheap = bn_plus_bias_mask(model) & (1 - self._head)  # BatchNorm scales and shifts, biases

    @classmethod
    def check(cls, model: tf.keras.Model, config) -> None:
        if not gradient_filter.blocks(model):
            raise UserError(f"elastic_window_training selects ranges of convolutional blocks, and {model.name} "
                            f"has none; use elastic_training")

    def choose(self, importance: np.ndarray) -> np.ndarray:
        mask = self.controller.select_window(importance, self.block_of, self._head, self.cheap)
        if mask.any():
            return mask
        logging.warning("no range of whole blocks fits the budget: this selection is ElasticTrainer's")
        return super().choose(importance)


class HeldOutWindowElasticTraining(HeldOutElasticTraining, WindowElasticTraining):
    """The first candidate's importance (each probe update scored on validation images it was not
    made on) summed over the second's structure (a range of whole blocks, the cheap tensors above
    it, the classifier): issue 34's third candidate."""

    train_type = "elastic_heldout_window_training"
