"""What a run's first batches and its loss curve say about it, told the user once: a training order
that looks class-sorted, a training loss that stays at chance. Pure arithmetic over what the loop
saw; imports no TensorFlow.
"""
from __future__ import annotations

import logging
import math
from typing import Optional, Sequence


CHANCE_MARGIN = 0.01  # an epoch's training loss within 1 % of ln(classes) is "at chance"


def at_chance(train_loss: float, num_classes: int, epochs_done: int, num_epochs: int) -> Optional[str]:
    """A warning when a run is a third or more of its epochs in and its training loss is still within
    CHANCE_MARGIN of ln(num_classes), what predicting every class alike scores; else None. A fresh
    classifier can flatten the backbone's features onto that plateau, which some runs never leave
    (docs/benchmarks/fresh_validation.md)."""
    if num_classes < 2 or epochs_done * 3 < num_epochs or not math.isfinite(train_loss):
        return None
    chance = math.log(num_classes)
    if train_loss < (1.0 - CHANCE_MARGIN) * chance:
        return None
    return (f"after {epochs_done} of {num_epochs} epochs the training loss is {train_loss:.3f}, within "
            f"{100 * CHANCE_MARGIN:.0f} % of ln({num_classes}) = {chance:.3f}: the model predicts no better than "
            f"chance. The fresh classifier's gradients have flattened the backbone's features; --head_init zeros "
            f"starts the classifier at zero, which kept such runs off this plateau (docs/benchmarks/fresh_validation.md)")



class ChanceWarning:
    """at_chance's warning, logged once a session."""

    def __init__(self, num_classes: int):
        self.num_classes, self.warned = num_classes, False

    def check(self, train_loss: float, epochs_done: int, num_epochs: int) -> None:
        """Warn when the training loss is still at chance a third of the way in, unless warned."""
        warning = None if self.warned else at_chance(train_loss, self.num_classes, epochs_done, num_epochs)
        if warning:
            self.warned = True
            logging.warning("warning: %s", warning)


MIX_BATCHES = 4  # the first training batches whose classes the loop counts (class_mix)


def class_mix(labels: Sequence[Sequence[int]], num_classes: int) -> "tuple[str, bool]":
    """What the first training batches hold, and whether their order looks class-sorted.

    `labels` holds the labels of a run's first training batches, one sequence a batch. Returns (one
    sentence for the log, flagged): flagged when draws from a balanced split would fall in so few
    classes with a chance below one in a million (bounded by C(num_classes, seen) * (seen /
    num_classes) ** draws), as when a class-sorted split is read unshuffled or shuffled in too small
    a buffer, so that the run trains on one class after another.
    """
    flat = [int(label) for batch in labels for label in batch]
    seen, draws = len(set(flat)), len(flat)
    expected = num_classes * (1.0 - (1.0 - 1.0 / num_classes) ** draws) if num_classes > 0 else 0.0
    per_batch = sum(len({int(label) for label in batch}) for batch in labels) / max(len(labels), 1)
    sentence = (f"the first {len(labels)} training batches ({draws} examples) hold {seen} of {num_classes} "
                f"classes, {per_batch:.1f} a batch (a shuffled balanced split: about {expected:.1f})")
    if not 0 < seen < num_classes:
        return sentence, False
    log_chance = (math.lgamma(num_classes + 1) - math.lgamma(seen + 1) - math.lgamma(num_classes - seen + 1)
                  + draws * math.log(seen / num_classes))
    return sentence, log_chance < math.log(1e-6)


class FirstBatches:
    """The labels of a session's first MIX_BATCHES training batches, reported once (class_mix): an
    info line, or a warning when their order looks class-sorted (such a pipeline trains, and learns
    little)."""

    def __init__(self, num_classes: int):
        self.num_classes = num_classes
        self.labels: Optional[list] = []  # None once reported

    def add(self, labels) -> None:
        """One batch's labels (a tensor); the report once MIX_BATCHES are in."""
        if self.labels is not None:
            self.labels.append(labels.numpy())
            if len(self.labels) == MIX_BATCHES:
                self.report()

    def report(self) -> None:
        """The report now (an epoch shorter than MIX_BATCHES), unless made or nothing was seen."""
        if not self.labels:
            return
        sentence, sorted_looking = class_mix(self.labels, self.num_classes)
        self.labels = None
        if sorted_looking:
            logging.warning("%s: the training order looks class-sorted; a training pipeline must shuffle the "
                            "whole split (data.load_epochs does) or this run learns one class after another",
                            sentence)
        else:
            logging.info("%s", sentence)
