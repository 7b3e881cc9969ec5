"""A run's evaluations, none of them training time: each epoch end's validation pass (and the test
set's, with --test_every_epoch), due every --eval_every epochs and at the run's last; the last
epoch's, when a deadline ended the run before that epoch's end knew it was the last; and the test
set once at the end, on the final and the validation-best weights (train.Loop asks for each)."""
from __future__ import annotations

import logging
import time
from typing import Callable, Dict, Optional

from elastic_trainer.config import TrainConfig
from elastic_trainer.kept_weights import KeptWeights
from elastic_trainer.run_outputs import RunOutputs
from elastic_trainer.run_summary import epoch_line, evaluation_fields, selected_epoch


class Evaluations:
    """`evaluate(dataset, split="test")` -> {"<split>/loss", "<split>/accuracy"} (train_step.make_evaluator)."""

    def __init__(self, evaluate: Callable, config: TrainConfig, kept: KeptWeights, outputs: RunOutputs):
        self.evaluate, self.config, self.kept, self.outputs = evaluate, config, kept, outputs
        self.final_test: Dict = {}  # final()'s results

    def due(self, epoch: int, last: bool) -> bool:
        """Whether epoch `epoch` (1-based) ends with an evaluation: every --eval_every-th, and the last."""
        return last or epoch % self.config.eval_every == 0

    def epoch_end(self, state, memory, test_data, val_data, last: bool = False) -> Optional[Dict[str, float]]:
        """Validation (and, given `test_data`, test) loss and accuracy at the end of the current
        epoch when it is due; None for an epoch in between. Its seconds go to state.evaluation_seconds."""
        if not self.due(state.epoch + 1, last):
            return None
        with memory.phase("evaluation"):
            start = time.perf_counter()
            metrics = self.evaluate(test_data) if test_data is not None else {}
            if val_data is not None:
                metrics.update(self.evaluate(val_data, "validation"))
            state.evaluation_seconds += time.perf_counter() - start
        return metrics

    def late_last_epoch(self, state, memory, length, test_data, val_data) -> None:
        """The last epoch's evaluation when its end did not know it was the last and --eval_every
        skipped it: a deadline that came with the next epoch's first batch (or at once in a resumed
        session). Model selection, the summary and experiments/ read the last epoch's accuracy."""
        if not state.history or state.history[-1].get("evaluated", True) or state.position:
            return  # (a position: a restored unfinished epoch's steps are in the weights, not that epoch's)
        entry = state.history[-1]
        metrics = self.epoch_end(state, memory, test_data, val_data, last=True)
        self.kept.select(state, metrics, entry["epoch"])
        del entry["evaluated"]
        entry.update(evaluation_fields(metrics))
        logging.info("%s (evaluated after the deadline ended the run)", epoch_line(
            length.epoch_label(entry["epoch"]), metrics, state.best_accuracy, state.train_seconds))
        self.outputs.scalars(state.step, {**metrics, "time/evaluation_seconds": state.evaluation_seconds})

    def final(self, state, memory, test_data) -> None:
        """The test set, once, after the last epoch: on the final weights and on the weights of
        the validation-best epoch (kept by the loop's epoch ends); their accuracies go to the summary
        and to TensorBoard at the last step. With test_every_epoch the epochs' evaluations have both."""
        if self.config.test_every_epoch:
            return
        best_epoch = selected_epoch(state.history)["best_val_epoch"]
        with memory.phase("evaluation"):
            self.final_test = self.kept.final_test(self.evaluate, test_data, best_epoch, len(state.history))
        self.outputs.scalars(state.step, {"time/final_test_seconds": self.final_test["final_test_seconds"]})
