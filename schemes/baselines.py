"""Fixed selections: the paper's baselines (full training, traditional transfer learning, BN+bias,
PruneTrain), the freeze-front baseline at ElasticTrainer's budget, and one range of blocks alone
(to measure where in the network the accuracy of fine-tuning comes from)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Tuple

import numpy as np
import tensorflow as tf

from elastic_trainer.command_line import UserError
from models import gradient_filter
from schemes.base import Context, Scheme, bn_plus_bias_mask, classifier_mask, kernels, layers_mask
from schemes.time_budget import StepTimeController

if TYPE_CHECKING:
    from elastic_trainer.config import TrainConfig

PRUNE_PENALTY = 1e-4  # weight of the L1 penalty on kernels (PruneTrain baseline)


class FullTraining(Scheme):
    """Every tensor trains."""

    train_type = "full_training"
    full_step = True


class TraditionalTL(Scheme):
    """Only the classifier trains (traditional transfer learning)."""

    train_type = "traditional_tl_training"

    def initial_mask(self, model):
        return classifier_mask(model)


class BNPlusBias(Scheme):
    """Normalization gammas/betas, all biases and the classifier train."""

    train_type = "bn_plus_bias_training"

    def initial_mask(self, model):
        return bn_plus_bias_mask(model)


class PruneTraining(Scheme):
    """Every tensor trains under an L1 penalty on kernels (the PruneTrain baseline)."""

    train_type = "prune_training"

    def __init__(self, context: Context):
        super().__init__(context)
        targets = kernels(context.model)
        self.penalty = lambda: PRUNE_PENALTY * tf.add_n([tf.reduce_sum(tf.abs(k)) for k in targets])


class StaticTop(Scheme):
    """Freeze-front baseline: the contiguous top of the network that fits ElasticTrainer's
    backward budget at the same rho (and rho mode), chosen once from the profile."""

    train_type = "static_top_training"
    needs_profile = True

    def initial_mask(self, model):
        config = self.context.config
        controller = StepTimeController(self.context.profile, config.rho, config.resolution, config.rho_mode)
        top = controller.static_top()
        return top if top.any() else classifier_mask(model)


class BlockRange(Scheme):
    """The backbone's blocks --block_range FIRST:STOP (counted from the input, 0-based, STOP
    excluded) and the classifier train; every other tensor stays frozen. An analysis baseline:
    run over consecutive ranges, it shows which depth of the network fine-tuning needs."""

    train_type = "block_range_training"

    @classmethod
    def add_flags(cls, flag) -> None:
        flag("--block_range", default=None, metavar="FIRST:STOP",
             help="required: train blocks FIRST to STOP-1 (from the input, from 0) and the classifier")

    @classmethod
    def check_flags(cls, args) -> None:
        if args.block_range is None:
            raise UserError("block_range_training needs --block_range FIRST:STOP, e.g. --train_type "
                            "block_range_training --block_range 0:4")
        args.block_range = "{}:{}".format(*parse_block_range(args.block_range))

    @classmethod
    def run_name_parts(cls, args) -> list:
        return ["blocks{}-{}".format(*parse_block_range(args.block_range))]

    @classmethod
    def check(cls, model: tf.keras.Model, config: "TrainConfig") -> None:
        block_range_mask(model, parse_block_range(config.block_range))

    def initial_mask(self, model: tf.keras.Model) -> np.ndarray:
        return block_range_mask(model, parse_block_range(self.context.config.block_range))


def parse_block_range(text: str) -> Tuple[int, int]:
    """'FIRST:STOP' -> (FIRST, STOP); UserError when it is not two integers FIRST < STOP."""
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text or "")
    if not match or int(match.group(1)) >= int(match.group(2)):
        raise UserError(f"--block_range must be FIRST:STOP with 0 <= FIRST < STOP (blocks FIRST to STOP-1, "
                        f"counted from the input), got {text!r}")
    return int(match.group(1)), int(match.group(2))


def block_range_mask(model: tf.keras.Model, block_range: Tuple[int, int]) -> np.ndarray:
    """Every tensor of the backbone's blocks [first, stop) and the classifier; UserError when the
    model has fewer blocks (the message lists them)."""
    found = gradient_filter.blocks(model)
    first, stop = block_range
    if stop > len(found):
        names = ", ".join(f"{index} {name}" for index, (name, _) in enumerate(found))
        raise UserError(f"--block_range {first}:{stop} goes past the {len(found)} blocks of {model.name}"
                        + (f" ({names})" if found else " (it has no convolutional blocks)"))
    return layers_mask(model, [layer for _, layers in found[first:stop] for layer in layers])
