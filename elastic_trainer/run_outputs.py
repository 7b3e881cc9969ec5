"""Everything a training run writes, in one place: TensorBoard events, weights, summary files.

Layout of a run named R under --logdir L:
    L/R/                  TensorBoard events: scalars (record_names.shown_scalar), pictures of the selections,
                          HParams (settings, results, status)
    L/R/config.json       the resolved configuration
    L/R/last_good.h5      when the loss diverged: weights at the end of the last finite epoch
    L/R/best_validation.npz  with each checkpoint, the validation-best epoch's weights, tested
                          after the last epoch and then removed
    L/R/checkpoints/      checkpoints to resume from (checkpoints.py)
    L/R/summary.json      final summary (best accuracy, wall time, speedup)
    L/R.txt               with --save_txt: the original's "time (h), accuracy (%)" line and more
    saved_models/R.h5     with --save_model: the best weights
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

import models
from elastic_trainer import selection_picture
from elastic_trainer.events import logged_selections, truncate_events
from elastic_trainer.files import atomic_path, atomic_write_json, atomic_write_text, ensure_writable_dir
from elastic_trainer.record_names import (BLOCKS_TAG, CLASSIFIER_TAG, IMPORTANCE_TAG, SELECTION_PICTURE_TAG,
                                          SELECTION_TAG, SELECTIONS_PICTURE_TAG, reported_accuracy,
                                          reported_accuracy_name, shown_scalar)


@dataclasses.dataclass(frozen=True)
class Setting:
    """A TrainConfig field in TensorBoard's HParams dashboard."""

    name: str
    compared: bool = False  # one of the five settings the dashboard shows without a tick
    description: str = ""


# The settings the HParams dashboard knows, the same for every run so that any run's declaration
# serves the log folder. TensorBoard shows the first five by (not differs, name): `compared` sets differs.
SETTINGS = (
    Setting("train_type", True, "the scheme (--train_type)"),
    Setting("rho", True, "the step-time budget (--rho; schemes with a time budget only)"),
    Setting("rho_mode", True, "how rho is read (--rho_mode; schemes with a time budget only)"),
    Setting("learning_rate", True), Setting("seed", True),
    Setting("interval", description="epochs between selections (schemes that re-select only)"),
    Setting("model_name"), Setting("dataset_name"), Setting("input_size"), Setting("batch_size"),
    Setting("num_epochs"), Setting("bn_mode"), Setting("validation"),
    Setting("time_budget", description="the run's wall-clock budget in seconds (--time_budget, when given)"),
    Setting("head_init", description="how the fresh classifier started (--head_init)"),
    Setting("memory_budget_mb", description="the selection's memory budget (when given)"),
    Setting("block_range", description="block_range_training's blocks"),
    Setting("gf_radius", description="the gradient filter's patch size (when on)"))

# The results, in the dashboard's order (it shows the first five): the summary/* scalars
# RunOutputs.summary writes once a run has finished (accuracies in percent, as in the terminal).
RESULTS = (("final_test_accuracy", "final test accuracy (%)", "the last epoch's weights on the test set"),
           ("step_time_ratio", "step time ratio", "the final selection's training step over a full one, "
                                                  "timed together after training (else the median step over the "
                                                  "profile's full step)"),
           ("train_seconds", "training seconds", "steps, data, selection and compiles; evaluation excluded"),
           ("test_accuracy_at_best_val", "test accuracy at best validation (%)",
            "the test set on the weights of the epoch of best validation accuracy"),
           ("process_seconds", "whole process seconds", "start-up, training, evaluation, checkpoints"),
           ("peak_memory_mb", "peak memory (MB)", "the process's peak resident memory"),
           ("deadline_steps", "steps run (deadline)", "steps a run under --time_budget took"),
           ("deadline_epochs", "epochs run (deadline)", "epochs a run under --time_budget took (the last may be partial)"),
           ("deadline_planned_steps", "steps first planned (deadline)", "the plan made before the first step"))


def applied_settings(config, budgeted: bool, periodic: bool) -> Dict[str, object]:
    """The SETTINGS values that apply to the run: rho and rho_mode for a scheme with a time budget
    (`budgeted`), the interval for one that re-selects (`periodic`), the memory budget, block
    range and gradient filter when given; the rest always."""
    left_out = set()
    if not budgeted:
        left_out |= {"rho", "rho_mode"}
    if not periodic:
        left_out.add("interval")
    for name, off in (("memory_budget_mb", 0.0), ("block_range", ""), ("gf_radius", 0), ("time_budget", 0.0)):
        if getattr(config, name) == off:
            left_out.add(name)
    return {setting.name: getattr(config, setting.name) for setting in SETTINGS if setting.name not in left_out}


def summary_results(summary: Dict) -> Dict[str, float]:
    """The RESULTS a finished run's summary has (finite ones), as the summary/* scalars' names."""
    live = summary.get("step_time_ratio_live", float("nan"))
    values = {**summary, "step_time_ratio": live if live is not None and math.isfinite(live)
              else summary.get("step_time_ratio_achieved"),
              **{f"deadline_{name}": value for name, value in (summary.get("deadline") or {}).items()}}
    return {f"summary/{name}": float(values[name]) for name, _, _ in RESULTS
            if isinstance(values.get(name), (int, float)) and math.isfinite(values[name])}


def unique_run_name(logdir: str, run_name: str) -> str:
    """`run_name`, or `run_name_2`, `_3`... when a run of that name already has logs."""
    candidate, number = run_name, 1
    while os.path.exists(os.path.join(logdir, candidate)):
        number += 1
        candidate = f"{run_name}_{number}"
    return candidate


class RunOutputs:
    """Writes one run's TensorBoard events, checkpoints and summaries."""

    def __init__(self, logdir: str, run_name: str, model_name: str, num_classes: int, input_size: int):
        self.run_dir = os.path.join(logdir, run_name)
        self.logdir, self.run_name = logdir, run_name
        self._weights_tags = dict(model_name=model_name, num_classes=num_classes, input_size=input_size)
        ensure_writable_dir(self.run_dir, "--logdir")
        self._writer = None
        self._selections: List[Tuple[Optional[int], np.ndarray]] = []  # (step, mask) of every selection so far
        self._drawn = 0  # how many of them have their pictures written
        self._blocks: List[Tuple[str, int]] = []
        self._classifier: Optional[int] = None
        self._steps_per_epoch: Optional[int] = None
        self._step = 0  # the last step scalars were written at (the summary's results go there too)

    @property
    def writer(self):
        """The run's TensorBoard writer, opened on first use (an error before that leaves no new
        event file behind)."""
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.run_dir)
        return self._writer

    def resume(self, saved_at: float, step: int, masks: List[List[int]]) -> int:
        """Continue a run's events from a checkpoint written at `saved_at` (epoch seconds) after `step`:
        events written later (the interrupted session's lost part) are removed, so curves show no step
        twice; the selection pictures continue from `masks`. Returns the number of events removed."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        removed = truncate_events(self.run_dir, saved_at, step)
        self._step = step
        steps = [logged for logged, _ in logged_selections(self.run_dir)]
        if len(steps) != len(masks):  # a checkpoint from before selections were logged as text
            steps = [None] * len(masks)
        self._selections = [(logged, np.asarray(mask, dtype=np.float32)) for logged, mask in zip(steps, masks)]
        self._drawn = len(self._selections)  # a checkpoint is written after the pictures (Loop.save_checkpoint)
        return removed

    def save_config(self, config) -> None:
        atomic_write_json(os.path.join(self.run_dir, "config.json"), dataclasses.asdict(config))

    def hparams(self, config, budgeted: bool, periodic: bool) -> None:
        """Declare SETTINGS and RESULTS to the HParams dashboard and record the run's applied_settings;
        the results follow when the run has finished (summary)."""
        from tensorboard.plugins.hparams import api as hp
        from tensorboard.plugins.hparams import plugin_data_pb2

        declared = hp.hparams_config_pb([hp.HParam(setting.name, description=setting.description)
                                         for setting in SETTINGS],
                                        [hp.Metric(f"summary/{name}", display_name=shown, description=description)
                                         for name, shown, description in RESULTS])
        content = declared.value[0].metadata.plugin_data
        data = plugin_data_pb2.HParamsPluginData.FromString(content.content)
        for info in data.experiment.hparam_infos:
            info.differs = any(setting.name == info.name and setting.compared for setting in SETTINGS)
        content.content = data.SerializeToString()
        with self.writer.as_default():
            tf.summary.experimental.write_raw_pb(declared.SerializeToString(), step=0)
            hp.hparams(applied_settings(config, budgeted, periodic), trial_id=self.run_name)
        self.writer.flush()

    def new_run(self, config, scheme) -> None:
        """A new run's records: its configuration, the HParams declaration (hparams) and, when its
        selection is fixed (`scheme` selects nothing at step 0), that selection once."""
        self.save_config(config)
        self.hparams(config, budgeted=scheme.needs_profile, periodic=scheme.reselects)
        if not scheme.due(0):
            self.selection_mask(0, scheme.mask)

    def selection(self, step: int, mask: np.ndarray, scalars: Dict[str, float],
                  importance: Optional[np.ndarray] = None) -> None:
        """A new selection at `step`: its scalars, its mask (selection_mask) and the importance it
        was made on, when the scheme has one."""
        self.scalars(step, scalars)
        self.selection_mask(step, mask)
        if importance is not None:
            self.importance(step, importance)

    def session_end(self, succeeded: bool) -> None:
        """The run's status in the HParams dashboard: Success once it has finished, Failure when it
        stopped for good (a diverged loss); an interrupted run that can resume has none."""
        from tensorboard.plugins.hparams import api_pb2
        from tensorboard.plugins.hparams import summary as hparams_summary

        status = api_pb2.STATUS_SUCCESS if succeeded else api_pb2.STATUS_FAILURE
        with self.writer.as_default():
            tf.summary.experimental.write_raw_pb(hparams_summary.session_end_pb(status).SerializeToString(), step=0)
        self.writer.flush()

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        """Write scalars named as the loop and schemes name them, each under the tag and in the unit
        record_names.shown_scalar gives (accuracies and shares in percent)."""
        self._step = max(self._step, step)
        with self.writer.as_default():
            for name, value in values.items():
                tag, scale = shown_scalar(name)
                tf.summary.scalar(tag, value * scale, step=step, description="percent" if scale == 100 else None)
        self.writer.flush()

    def epoch_end(self, step: int, values: Dict[str, float]) -> None:
        """An epoch's scalars, after the pictures of its selections (drawn outside training time)."""
        self.flush_pictures()
        self.scalars(step, values)

    def mask_layout(self, blocks: Sequence[Tuple[str, int]], classifier: Optional[int] = None,
                    steps_per_epoch: Optional[int] = None) -> None:
        """The model's blocks (name, first tensor index) and classifier (its first tensor index),
        named in the pictures of selections, and the epoch's length for their labels."""
        self._blocks = [(str(name), int(start)) for name, start in blocks]
        self._classifier = None if classifier is None else int(classifier)
        self._steps_per_epoch = steps_per_epoch

    def selection_mask(self, step: int, mask: np.ndarray) -> None:
        """Log a selection as text ("0110...", which experiments/plot.py reads back), and keep it for
        its pictures (flush_pictures)."""
        self._selections.append((step, np.asarray(mask, dtype=np.float32)))
        with self.writer.as_default():
            if len(self._selections) == 1:
                if self._blocks:
                    tf.summary.text(BLOCKS_TAG, json.dumps(self._blocks), step=step)
                if self._classifier is not None:
                    tf.summary.text(CLASSIFIER_TAG, json.dumps([self._classifier]), step=step)
            tf.summary.text(SELECTION_TAG, "".join(str(int(v)) for v in mask), step=step)
        self.writer.flush()

    def flush_pictures(self) -> None:
        """Write the pictures of the selections logged since the last call, at their steps (every selection
        so far, and the new one alone); drawing is slow, so the loop calls this outside training time."""
        if self._drawn == len(self._selections):
            return
        with self.writer.as_default():
            for index in range(self._drawn, len(self._selections)):
                step, mask = self._selections[index]
                so_far = self._selections[:index + 1]
                every = selection_picture.picture(
                    [logged for _, logged in so_far], [at for at, _ in so_far], self._blocks, self._classifier,
                    self._steps_per_epoch, f"{index + 1} selection{'s' * (index > 0)} so far (dark: trained)")
                alone = selection_picture.picture([mask], [step], self._blocks, self._classifier,
                                                  self._steps_per_epoch, f"selection {index + 1} (dark: trained)")
                tf.summary.image(SELECTIONS_PICTURE_TAG, every[None], step=step,
                                 description="every selection so far, a band each from the first: rows are "
                                             "tensors from the input (bottom) to the classifier (top), dark = "
                                             "trained; block names at the side, each band's step and epoch above")
                tf.summary.image(SELECTION_PICTURE_TAG, alone[None], step=step,
                                 description="the selection made at this step alone (dark = trained)")
        self._drawn = len(self._selections)
        self.writer.flush()

    def importance(self, step: int, values: np.ndarray) -> None:
        """Log the importance a selection was made on (text: a JSON list, model order), for
        reading how a scheme ranks the network's stages (experiments/study_selection.py)."""
        with self.writer.as_default():
            tf.summary.text(IMPORTANCE_TAG, json.dumps([round(float(v), 6) for v in values]), step=step)
        self.writer.flush()

    def save_weights(self, model: tf.keras.Model, path: str) -> None:
        models.save_weights(model, path, **self._weights_tags)

    def checkpoint(self, model: tf.keras.Model) -> str:
        path = os.path.join(self.run_dir, "last_good.h5")
        self.save_weights(model, path)
        return path

    def best_validation_path(self) -> str:
        return os.path.join(self.run_dir, "best_validation.npz")

    def save_best_validation(self, epoch: int, weights: List[np.ndarray]) -> None:
        """Keep the validation-best epoch's weights (model.get_weights() order) beside the checkpoint
        that a resumed run starts from (atomically)."""
        with atomic_path(self.best_validation_path()) as temporary:
            with open(temporary, "wb") as handle:
                np.savez(handle, epoch=np.int64(epoch), *weights)

    def load_best_validation(self) -> Optional[tuple]:
        """(epoch, weights) saved by save_best_validation, or None when there are none."""
        if not os.path.exists(self.best_validation_path()):
            return None
        with np.load(self.best_validation_path()) as saved:
            return int(saved["epoch"]), [saved[f"arr_{index}"] for index in range(len(saved.files) - 1)]

    def discard_best_validation(self) -> None:
        """Remove the validation-best weights once the test set has seen them (--save_model keeps
        the best weights in saved_models/)."""
        if os.path.exists(self.best_validation_path()):
            os.remove(self.best_validation_path())

    def save_best(self, model: tf.keras.Model) -> str:
        path = os.path.join("saved_models", f"{self.run_name}.h5")
        self.save_weights(model, path)
        return path

    def summary(self, summary: Dict, save_txt: bool) -> Optional[str]:
        """Write the finished run's summary (summary.json, and with `save_txt` the original's text
        line, whose path is returned), its RESULTS as summary/* scalars at its last step, and its
        status."""
        atomic_write_json(os.path.join(self.run_dir, "summary.json"), summary)
        self.scalars(self._step, summary_results(summary))
        self.session_end(succeeded=True)
        if not save_txt:
            return None
        path = os.path.join(self.logdir, f"{self.run_name}.txt")
        atomic_write_text(path, f"# train_time_hours {reported_accuracy_name(summary)}_percent step_time_ratio_achieved "
                                "step_time_ratio_target\n"
                                f"{summary['train_time_hours']:.6f} {reported_accuracy(summary) * 100:.2f} "
                                f"{summary['step_time_ratio_achieved']:.4f} {summary['step_time_ratio_target']:.4f}\n")
        return path
