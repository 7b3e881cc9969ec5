"""Fixed selections: the paper's baselines (full training, traditional transfer learning, BN+bias,
PruneTrain) and the freeze-front baseline at ElasticTrainer's budget."""
from __future__ import annotations

import tensorflow as tf

from schemes.base import Context, Scheme, bn_plus_bias_mask, classifier_mask, kernels
from schemes.time_budget import StepTimeController

PRUNE_PENALTY = 1e-4  # weight of the L1 penalty on kernels (PruneTrain baseline)


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


class StaticTop(Scheme):
    """Freeze-front baseline: the contiguous top of the network that fits ElasticTrainer's
    backward budget at the same rho (and rho mode), chosen once from the profile."""

    needs_profile = True

    def initial_mask(self, model):
        config = self.context.config
        controller = StepTimeController(self.context.profile, config.rho, config.resolution, config.rho_mode)
        top = controller.static_top()
        return top if top.any() else classifier_mask(model)
