"""Everything a training run writes, in one place: TensorBoard events, weights, summary files.

Layout of a run named R under --logdir L:
    L/R/                  TensorBoard events (scalars, the selection-mask image)
    L/R/config.json       the resolved configuration
    L/R/last_good.h5      weights at the end of the last finite epoch
    L/R/checkpoints/      checkpoints to resume from (checkpoints.py)
    L/R/summary.json      final summary (best accuracy, wall time, speedup)
    L/R.txt               with --save_txt: the original's "time (h), accuracy (%)" line and more
    saved_models/R.h5     with --save_model: the best weights
"""
from __future__ import annotations

import dataclasses
import glob
import os
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

import models
from utils import atomic_write_json, atomic_write_text, ensure_writable_dir


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
        self._masks: List[np.ndarray] = []

    @property
    def writer(self):
        """The run's TensorBoard writer, opened on first use (an error before that leaves no new
        event file behind)."""
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.run_dir)
        return self._writer

    def resume(self, saved_at: float, step: int, masks: List[List[int]]) -> int:
        """Continue a run's events from a checkpoint written at `saved_at` (epoch seconds) after
        `step`: events written after it (the lost part of the interrupted session) are removed, so
        curves go on with no step twice; the mask image continues from `masks`. Returns the
        events removed."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        removed = truncate_events(self.run_dir, saved_at, step)
        self._masks = [np.asarray(mask, dtype=np.float32) for mask in masks]
        return removed

    def save_config(self, config) -> None:
        atomic_write_json(os.path.join(self.run_dir, "config.json"), dataclasses.asdict(config))

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        with self.writer.as_default():
            for tag, value in values.items():
                tf.summary.scalar(tag, value, step=step)
        self.writer.flush()

    def selection_mask(self, step: int, mask: np.ndarray) -> None:
        """Append a selection to the mask-over-time image (rows: selections, columns: tensors)."""
        self._masks.append(np.asarray(mask, dtype=np.float32))
        image = np.stack(self._masks)  # (selections, tensors), 1 = trained
        scale = max(1, 8 // len(self._masks)) if len(self._masks) < 8 else 1
        image = np.repeat(1.0 - image, scale, axis=0)  # dark = trained, like the paper's Fig. 21
        with self.writer.as_default():
            tf.summary.image("elastic/selection_masks", image[None, :, :, None], step=step,
                             description="rows: successive selections (top = first); columns: "
                                         "tensors in model order (input ... classifier); dark = trained")
        self.writer.flush()

    def save_weights(self, model: tf.keras.Model, path: str) -> None:
        models.save_weights(model, path, **self._weights_tags)

    def checkpoint(self, model: tf.keras.Model) -> str:
        path = os.path.join(self.run_dir, "last_good.h5")
        self.save_weights(model, path)
        return path

    def save_best(self, model: tf.keras.Model) -> str:
        path = os.path.join("saved_models", f"{self.run_name}.h5")
        self.save_weights(model, path)
        return path

    def summary(self, summary: Dict, save_txt: bool) -> Optional[str]:
        atomic_write_json(os.path.join(self.run_dir, "summary.json"), summary)
        if not save_txt:
            return None
        path = os.path.join(self.logdir, f"{self.run_name}.txt")
        atomic_write_text(path, "# train_time_hours best_test_accuracy_percent step_time_ratio_achieved "
                                "step_time_ratio_target\n"
                                f"{summary['train_time_hours']:.6f} {summary['best_test_accuracy'] * 100:.2f} "
                                f"{summary['step_time_ratio_achieved']:.4f} {summary['step_time_ratio_target']:.4f}\n")
        return path


def truncate_events(run_dir: str, until: float, last_step: Optional[int] = None) -> int:
    """Keep only the events of `run_dir` written at or before `until` (wall time) and, when
    given, at steps up to `last_step` (a guard should the clock have stepped back): rewrite them
    into one file (atomically) in place of the old ones. A record cut short by a crash ends its
    file. Returns how many events were dropped."""
    from tensorboard.compat.proto import event_pb2

    files = sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")))
    kept, dropped, damaged = [], 0, False
    for path in files:
        try:
            for record in tf.data.TFRecordDataset(path):
                raw = record.numpy()
                event = event_pb2.Event.FromString(raw)
                if event.wall_time <= until and (last_step is None or event.step <= last_step):
                    kept.append(raw)
                else:
                    dropped += 1
        except tf.errors.DataLossError:  # the process died while writing this record
            damaged = True
    if not files or (not dropped and not damaged):
        return dropped
    temporary = os.path.join(run_dir, ".events.rewrite.tmp")
    with tf.io.TFRecordWriter(temporary) as writer:
        for raw in kept:
            writer.write(raw)
    os.replace(temporary, files[0])  # the oldest name, so readers still find it first
    for path in files[1:]:
        os.remove(path)
    return dropped
