"""Gradient filtering's fine-tuning (Yang et al., CVPR 2023) as a scheme; the filter itself is
gradient_filter.py, applied to the model when it is built (main.py --gf_radius)."""
from __future__ import annotations

import numpy as np

from models import gradient_filter
from schemes.base import Scheme, layers_mask


class GradientFilterTraining(Scheme):
    """The backbone's last --gf_blocks blocks (every tensor of theirs, their convolutions'
    gradients filtered over --gf_radius patches) and the classifier train; earlier layers stay
    frozen, so back-propagation stops at the first filtered block."""

    def initial_mask(self, model):
        return last_blocks_mask(model, self.context.config.gf_blocks)


def last_blocks_mask(model, blocks: int) -> np.ndarray:
    """Every tensor of the backbone's last `blocks` blocks, and the classifier."""
    return layers_mask(model, gradient_filter.filtered_block_layers(model, blocks))
