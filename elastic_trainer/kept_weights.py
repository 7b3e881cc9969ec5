"""The weights a run keeps beside its checkpoints, and the final test on them: the last finite
epoch's (written to last_good.h5 when the loss diverges) and the validation-best epoch's (the
test set sees them after the last epoch; saved with each checkpoint, which a resumed run starts
from). Kept in memory as model.get_weights() copies (~10 ms for MobileNetV2; a file: ~100 ms)."""
from __future__ import annotations

import logging
import time
from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf

from elastic_trainer import checkpoints


class KeptWeights:
    """The last good and the validation-best weights of one run; `outputs` (its RunOutputs) writes
    them, and with `save_model` the best weights to saved_models/."""

    def __init__(self, model: tf.keras.Model, outputs, save_model: bool):
        self.model, self.outputs, self.save_model = model, outputs, save_model
        self.last_good: Optional[tuple] = None  # (epoch, weights) at the end of the last finite epoch
        self.best: Optional[tuple] = None  # (epoch, weights) of the validation-best epoch so far
        self.unsaved = False  # `best` changed since the last checkpoint

    def select(self, state, metrics: Optional[Dict[str, float]], epoch: int) -> None:
        """Keep the weights at the end of epoch `epoch` (1-based) as the last good ones, and as the
        best when its validation (else test) accuracy is the best so far: in memory for the final
        test, on disk with save_model. `metrics` None: an epoch --eval_every skipped, which has no
        accuracy to be the best by. `state` (train.LoopState) keeps the best accuracies."""
        weights = self.model.get_weights()
        self.last_good = (epoch, weights)
        if metrics is None:
            return
        validated, tested = "validation/accuracy" in metrics, "test/accuracy" in metrics
        if tested:
            state.best_accuracy = max(state.best_accuracy, metrics["test/accuracy"])
        selected = metrics.get("validation/accuracy", metrics.get("test/accuracy"))
        if selected is None or selected > state.best_selected:  # the first epoch of the best, as summarize() picks
            state.best_selected = -1.0 if selected is None else selected  # nothing to select on: the latest
            if validated and not tested:  # the test set sees these weights after the last epoch
                self.best, self.unsaved = (epoch, weights), True
            if self.save_model:
                self.outputs.save_best(self.model)

    def save(self) -> None:
        """With each checkpoint: a resumed run's final test needs the validation-best weights."""
        if self.unsaved:
            self.outputs.save_best_validation(*self.best)
            self.unsaved = False

    def keep_last_good(self, run_checkpoints: checkpoints.RunCheckpoints) -> str:
        """When the loss diverged: write the last finite epoch's weights (in memory, or the last
        checkpoint's) to last_good.h5; returns what was kept, for the error."""
        if self.last_good is not None:
            self.model.set_weights(self.last_good[1])
            when = f"end of epoch {self.last_good[0]}"
        elif checkpoints.has_checkpoint(self.outputs.run_dir):
            when = f"the last checkpoint, step {run_checkpoints.restore()['step']}"
        else:
            return "no epoch finished, so there are no weights to keep"
        return f"the last good weights ({when}) are kept in {self.outputs.checkpoint(self.model)}"

    def final_test(self, evaluate: Callable, test_data: tf.data.Dataset, best_epoch: Optional[int],
                   last_epoch: int) -> Dict[str, float]:
        """The test set, once, after the last epoch (of `last_epoch`): on the final weights and on
        those of the validation-best epoch `best_epoch` (None: no validation split); the summary's
        final_test_accuracy, test_accuracy_at_best_val and final_test_seconds, said in the log."""
        start = time.perf_counter()
        final, at_best = self.test(evaluate, test_data, best_epoch, last_epoch)
        seconds = time.perf_counter() - start
        logging.info("test accuracy: %.2f%% with the final weights%s", 100 * final,
                     f", {100 * at_best:.2f}% with epoch {best_epoch}'s (best validation accuracy)"
                     if at_best is not None else "")
        return {"final_test_accuracy": final, "final_test_seconds": seconds,
                **({"test_accuracy_at_best_val": at_best} if best_epoch is not None else {})}

    def test(self, evaluate: Callable, test_data: tf.data.Dataset, best_epoch: Optional[int],
             last_epoch: int) -> Tuple[float, Optional[float]]:
        """Test accuracy of the final weights, and of the weights of `best_epoch` (validation-best;
        the final ones' when it is the last or None; None when they were not kept). The model
        ends with its final weights."""
        final = evaluate(test_data)["test/accuracy"]
        if best_epoch in (None, last_epoch):
            return final, final
        best = self.best or self.outputs.load_best_validation()
        if best is None or best[0] != best_epoch:  # a run resumed from a checkpoint written before they were kept
            logging.warning("the weights of epoch %d (best validation accuracy) were not kept: no test "
                            "accuracy at the validation-best epoch", best_epoch)
            return final, None
        final_weights = self.model.get_weights()
        self.model.set_weights(best[1])
        at_best = evaluate(test_data)["test/accuracy"]
        self.model.set_weights(final_weights)
        return final, at_best
