"""Training schemes: each answers "which tensors train now?" as a 0/1 mask over
model.trainable_weights (forward order) and may re-decide as training goes. The loop (train.py)
runs the compiled step of the current mask without knowing the scheme; a scheme declares what it
needs (`needs_profile`, `lite_residual`, its own flags and checks) and may add a loss term (`penalty`).

Every module of this package is imported here, and every Scheme subclass naming a `train_type`
registers itself: a new scheme is one new file in schemes/ (see base.Scheme).
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Dict

from schemes.base import REGISTRY, Context, Scheme, classifier_mask, kernels
from schemes.baselines import PRUNE_PENALTY, BlockRange
from schemes.elastic import ElasticTraining
from schemes.probe import ImportanceProbe, normalized
from schemes.time_budget import StepTimeController

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")  # a scheme in a file of its own registers itself

# --train_type -> scheme class: the paper's baselines, the other on-device methods, ElasticTrainer
# and its ablations, then any scheme a file of its own adds (in the order its module was imported)
LISTED = ("full_training", "traditional_tl_training", "bn_plus_bias_training", "prune_training", "tinytl_bias_training",
          "tinytl_lite_residual_training", "static_top_training", "block_range_training", "gradient_filter_training",
          "sparse_update_training", "elastic_training", "elastic_training_weight_magnitude",
          "elastic_training_grad_magnitude")
SCHEMES: Dict[str, type] = {**{name: REGISTRY[name] for name in LISTED if name in REGISTRY}, **REGISTRY}

__all__ = ["SCHEMES", "Context", "Scheme", "classifier_mask", "kernels", "PRUNE_PENALTY", "BlockRange", "ElasticTraining",
           "ImportanceProbe", "normalized", "StepTimeController"]
