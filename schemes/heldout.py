"""ElasticTrainer with its importance scored on images the probe's update did not see (issue 34's
candidate; ElasticTrainer itself stays as it is in elastic.py).

ElasticTrainer scores tensor k by -sum(g1 * dw0): dw0 is one optimizer step on the probe batch,
g1 the gradient on the *same* batch after it. That is how much the update lowers the loss of the
images it was made on, so a tensor whose update fits those 32 images ranks high whether or not the
fit carries to other images. Here g1 is taken on other images: the next batch of the run's
validation split when it has one (in an order drawn from the run's seed), else the next batch of
the training probe stream. A tensor ranks high when its update lowers the loss of images it was
not made on. Everything else is
ElasticTrainer's: the budget rho (both modes), the profile's times, the DP, the closed loop on
measured steps, and the probe's cost (two gradient passes per probe batch).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

import data
from schemes.base import Context
from schemes.elastic import ElasticTraining


HELD_OUT_BUFFER = 8192  # validation images shuffled at once (the embedded targets have 1 280)


class HeldOutElasticTraining(ElasticTraining):
    """ElasticTrainer whose importance is the loss change on held-out images."""

    train_type = "elastic_heldout_training"
    candidate = True

    def __init__(self, context: Context):
        super().__init__(context)
        self._held_out = None
        if context.validation is not None:  # in an order of the run's seed, full batches only
            config = context.config
            shuffled = context.validation.unbatch().shuffle(self.held_out_buffer(), seed=config.seed,
                                                            reshuffle_each_iteration=False)
            self._held_out = data.FixedEpochs(shuffled.batch(config.batch_size, drop_remainder=True))
        self.held_out_position = 0  # batches of the validation split scored so far

    def held_out_buffer(self) -> int:
        """Validation images shuffled at once before the scored batches are cut: the whole split
        (up to HELD_OUT_BUFFER), which the first scored batch waits for."""
        return HELD_OUT_BUFFER

    def scored_batches(self, count: Optional[int] = None) -> List:
        """The batches the probe's updates are scored on, one per probe batch (`count`: how many,
        --probe_batches when not given)."""
        count = count or self.context.config.probe_batches
        if self._held_out is None:  # no validation split: the training probe stream's next batches
            return self.probe_batches(count)
        batches = self._held_out.probe(self.held_out_position, count)
        self.held_out_position += count
        return batches

    def importance(self) -> np.ndarray:
        updates = self.probe_batches()
        return self.probe.loss_change(updates, scored=self.scored_batches())

    def state(self) -> Dict:
        return {**super().state(), "held_out_position": self.held_out_position}

    def load_state(self, state: Dict) -> None:
        super().load_state(state)
        self.held_out_position = state.get("held_out_position", 0)
