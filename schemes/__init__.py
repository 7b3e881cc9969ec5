"""Training schemes: each answers "which tensors train now?" as a 0/1 mask over
model.trainable_weights (forward order) and may re-decide as training goes. The loop (train.py)
runs the compiled step of the current mask and never asks which scheme it runs; a scheme says
what it needs (`needs_profile`, `lite_residual` layers in the model) and may add a loss term
(`penalty`).

One module per family: baselines, tinytl (bias-only, lite residual), elastic (ElasticTrainer and
its ablations), filtering (gradient filtering), sparse_update (contribution analysis); the registry below maps each --train_type to its
class.
"""
from __future__ import annotations

from typing import Dict

from schemes.base import NORMALIZATION_LAYERS, Context, Scheme, bias_mask, bn_plus_bias_mask, classifier_mask, kernels
from schemes.baselines import PRUNE_PENALTY, BlockRange, BNPlusBias, FullTraining, PruneTraining, StaticTop, TraditionalTL
from schemes.filtering import GradientFilterTraining
from schemes.sparse_update import SparseUpdate
from schemes.tinytl import TinyTLBias, TinyTLLiteResidual
from schemes.elastic import ElasticGradMagnitude, ElasticTraining, ElasticWeightMagnitude, ImportanceProbe, normalized
from schemes.time_budget import StepTimeController

SCHEMES: Dict[str, type] = {
    "full_training": FullTraining,
    "traditional_tl_training": TraditionalTL,
    "bn_plus_bias_training": BNPlusBias,
    "prune_training": PruneTraining,
    "tinytl_bias_training": TinyTLBias,
    "tinytl_lite_residual_training": TinyTLLiteResidual,
    "static_top_training": StaticTop,
    "block_range_training": BlockRange,
    "gradient_filter_training": GradientFilterTraining,
    "sparse_update_training": SparseUpdate,
    "elastic_training": ElasticTraining,
    "elastic_training_weight_magnitude": ElasticWeightMagnitude,
    "elastic_training_grad_magnitude": ElasticGradMagnitude,
}

__all__ = ["SCHEMES", "NORMALIZATION_LAYERS", "PRUNE_PENALTY", "Context", "Scheme", "StepTimeController",
           "ImportanceProbe", "normalized", "classifier_mask", "bn_plus_bias_mask", "bias_mask", "kernels", *
           [cls.__name__ for cls in SCHEMES.values()]]
