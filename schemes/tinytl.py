"""TinyTL (Cai et al., NeurIPS 2020): fine-tune the biases only, or the biases and lite residual
branches (lite_residual.py), with the weights frozen."""
from __future__ import annotations

import numpy as np

import models
from elastic_trainer.command_line import UserError
from models import lite_residual
from schemes.base import Scheme, bias_mask


class TinyTLBias(Scheme):
    """TinyTL's bias-only update: every bias (normalization betas included, gammas frozen) and the
    classifier train; the weights stay frozen, so no weight gradient and no stored activation is
    needed below the classifier."""

    train_type = "tinytl_bias_training"

    def initial_mask(self, model):
        return bias_mask(model)


class TinyTLLiteResidual(Scheme):
    """TinyTL's lite residual learning: the lite residual branches added to the backbone's blocks
    (they start as a no-op), every bias and the classifier train; the original weights stay
    frozen."""

    train_type = "tinytl_lite_residual_training"
    lite_residual = True

    def initial_mask(self, model):
        owners = models.owner_layers(model)
        branches = np.array([lite_residual.is_branch_layer(owner) for owner in owners], np.uint8)
        if not branches.any():
            raise UserError(f"{model.name} has no lite residual branches: build it with "
                            f"models.build_model(..., lite_residual=True)")
        return bias_mask(model) | branches
