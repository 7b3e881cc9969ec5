"""The names a run's records go by: the TensorBoard tags of its selections, where each scalar is
shown (and in which unit), which of a summary's test accuracies a figure reports. The writer
(run_outputs.py) and the readers (experiments/plot.py, the tables) share them here, so neither
imports the other. Imports no TensorFlow.
"""
from __future__ import annotations


# The TensorBoard tags of a run's selections: run_outputs.py writes them, experiments/plot.py reads
# them back (here, where neither has to import the other).
SELECTION_TAG = "elastic/selection"  # each selection as text, "0110...": tensors in model order, 1 = trained
SELECTIONS_PICTURE_TAG = "selection/all"  # the picture of every selection so far (an image, at each selection)
SELECTION_PICTURE_TAG = "selection/each"  # the picture of the selection made at that step alone
IMPORTANCE_TAG = "elastic/importance"  # the importance each selection was made on, JSON, tensors in model order
BLOCKS_TAG = "elastic/blocks"  # JSON [[block name, first tensor index], ...], once
CLASSIFIER_TAG = "elastic/classifier"  # JSON [first tensor index of the classifier], once

# TensorBoard sorts card groups (a tag up to its first "/") by name and Time Series opens only the
# first two. Scalars are named by what they measure ("validation/accuracy"); run_outputs.py files each
# under the tag `shown_scalar` gives, and experiments/plot.py looks names up through it: accuracy, loss
# and step time first, then summary and times, the rest under INTERNALS; fractions as percentages.
SPLITS = ("train", "validation", "test")
SHOWN_GROUPS = ("accuracy", "loss", "step_time", "summary", "time")  # written as they are named
INTERNALS = "under_the_hood"  # selection internals, memory, energy, the learning rate
PERCENT_ENDINGS = ("accuracy", "_share", "_fraction")


def shown_scalar(name: str) -> tuple:
    """(tag, scale): where TensorBoard shows the scalar named `name`, and the factor its values are
    written with (100 for names ending in PERCENT_ENDINGS). "<split>/accuracy" becomes
    "accuracy/<split>", "<split>/classification_loss" "loss/<split>"; names in SHOWN_GROUPS stay;
    any other goes under INTERNALS."""
    group, _, quantity = name.partition("/")
    scale = 100.0 if name.endswith(PERCENT_ENDINGS) else 1.0
    if group in SPLITS and quantity in ("accuracy", "classification_loss"):
        return f"{'accuracy' if quantity == 'accuracy' else 'loss'}/{group}", scale
    if group in SHOWN_GROUPS:
        return name, scale
    return f"{INTERNALS}/{name}", scale


def reported_accuracy_name(summary: dict) -> str:
    """Which test accuracy of a run summary to report in one figure: the best over epochs when
    every epoch was tested (the original's figure, --test_every_epoch), else the final epoch's."""
    return "best_test_accuracy" if summary.get("best_test_accuracy") is not None else "final_test_accuracy"


def reported_accuracy(summary: dict) -> float:
    """The value of `reported_accuracy_name(summary)`."""
    return summary[reported_accuracy_name(summary)]
