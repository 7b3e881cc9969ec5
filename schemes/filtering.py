"""Gradient filtering's fine-tuning (Yang et al., CVPR 2023) as a scheme; the filter itself is
gradient_filter.py, applied to the model when it is built (main.py --gf_radius)."""
from __future__ import annotations

from elastic_trainer.command_line import UserError
from models import gradient_filter
from schemes.base import Scheme, layers_mask


class GradientFilterTraining(Scheme):
    """The backbone's last --gf_blocks blocks (every tensor of theirs, their convolutions'
    gradients filtered over --gf_radius patches) and the classifier train; earlier layers stay
    frozen, so back-propagation stops at the first filtered block."""

    train_type = "gradient_filter_training"
    flag_defaults = {"gf_radius": gradient_filter.DEFAULT_RADIUS}

    @classmethod
    def check_flags(cls, args) -> None:
        if not args.gf_radius:
            raise UserError("gradient_filter_training needs a gradient filter: drop --gf_radius 0 or give "
                            "--gf_radius R")

    def initial_mask(self, model):  # every tensor of the last --gf_blocks blocks, and the classifier
        return layers_mask(model, gradient_filter.filtered_block_layers(model, self.context.config.gf_blocks))
