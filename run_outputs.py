"""Everything a training run writes, in one place: TensorBoard events, weights, summary files.

Layout of a run named R under --logdir L:
    L/R/                  TensorBoard events (scalars, the selection-mask image)
    L/R/config.json       the resolved configuration
    L/R/last_good.h5      when the loss diverged: weights at the end of the last finite epoch
    L/R/best_validation.npz  while it trains, written with each checkpoint: the validation-best
                          epoch's weights, which the test set sees after the last epoch (removed
                          when the run finishes)
    L/R/checkpoints/      checkpoints to resume from (checkpoints.py)
    L/R/summary.json      final summary (best accuracy, wall time, speedup)
    L/R.txt               with --save_txt: the original's "time (h), accuracy (%)" line and more
    saved_models/R.h5     with --save_model: the best weights
"""
from __future__ import annotations

import dataclasses
import datetime
import glob
import hashlib
import json
import os
import platform
import shlex
import socket
import subprocess
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

import models
from utils import (BLOCKS_TAG, IMPORTANCE_TAG, MASK_TAG, SELECTION_TAG, atomic_path, atomic_write_json, atomic_write_text,
                   ensure_writable_dir, reported_accuracy, reported_accuracy_name)


MASK_BAND_PX = 14  # a selection's band in the picture of selections
MASK_WIDTH_PX = 480  # the picture's width, about (each tensor a column of whole pixels)


def mask_image(masks: Sequence[Sequence[float]], block_starts: Sequence[int] = ()) -> np.ndarray:
    """Selections over time as a picture a person can read, (height, width) in [0, 1]: a band
    MASK_BAND_PX high per selection (top: first), one white line between bands; each tensor a
    column of equal width, dark = trained; a grey line before the first tensor of each block."""
    masks = np.asarray(masks, dtype=np.float32)
    tensors = masks.shape[1]
    column = max(1, -(-MASK_WIDTH_PX // max(tensors, 1)))
    bands = []
    for mask in masks:
        bands.append(np.repeat(np.repeat(1.0 - mask, column)[None, :], MASK_BAND_PX, axis=0))
        bands.append(np.ones((1, tensors * column), np.float32))
    image = np.concatenate(bands[:-1])
    for start in sorted(set(block_starts), reverse=True):  # from the right: earlier positions stay put
        if 0 < start < tensors:
            image = np.insert(image, start * column, 0.55, axis=1)
    return image


# The settings shown in TensorBoard's HParams dashboard (TrainConfig fields).
HPARAMS = ("train_type", "rho", "rho_mode", "learning_rate", "seed", "model_name", "dataset_name", "bn_mode",
           "batch_size", "num_epochs", "interval", "memory_budget_mb", "block_range", "gf_radius")


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
        self._blocks: List[Tuple[str, int]] = []

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

    def hparams(self, config) -> None:
        """The run's settings for TensorBoard's HParams dashboard (runs compared by scheme, rho,
        seed...); the results go to `hparams/...` scalars at the end (see Loop.summary)."""
        from tensorboard.plugins.hparams import api as hp

        values = {name: getattr(config, name) for name in HPARAMS}
        values = {name: ("" if value is None else value) for name, value in values.items()}
        with self.writer.as_default():
            hp.hparams(values, trial_id=self.run_name)
        self.writer.flush()

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        with self.writer.as_default():
            for tag, value in values.items():
                tf.summary.scalar(tag, value, step=step)
        self.writer.flush()

    def mask_layout(self, blocks: Sequence[Tuple[str, int]]) -> None:
        """The model's blocks (name, first tensor index), marked in the pictures of selections."""
        self._blocks = [(str(name), int(start)) for name, start in blocks]

    def selection_mask(self, step: int, mask: np.ndarray) -> None:
        """Append a selection to the picture of selections over time (TensorBoard's Images tab:
        a band per selection, top = first, dark = trained, a grey line where a block begins) and
        log it as text ("0110..."), which scripts/plot.py reads back."""
        self._masks.append(np.asarray(mask, dtype=np.float32))
        image = mask_image(self._masks, [start for _, start in self._blocks])
        with self.writer.as_default():
            if len(self._masks) == 1 and self._blocks:
                tf.summary.text(BLOCKS_TAG, json.dumps(self._blocks), step=step)
            tf.summary.text(SELECTION_TAG, "".join(str(int(v)) for v in mask), step=step)
            tf.summary.image(MASK_TAG, image[None, :, :, None], step=step,
                             description="a band per selection (top: first, the last is the current one); "
                                         "columns: tensors in model order (input ... classifier), dark = "
                                         "trained; grey lines: where each block of the backbone begins")
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
        atomic_write_json(os.path.join(self.run_dir, "summary.json"), summary)
        if not save_txt:
            return None
        path = os.path.join(self.logdir, f"{self.run_name}.txt")
        atomic_write_text(path, f"# train_time_hours {reported_accuracy_name(summary)}_percent step_time_ratio_achieved "
                                "step_time_ratio_target\n"
                                f"{summary['train_time_hours']:.6f} {reported_accuracy(summary) * 100:.2f} "
                                f"{summary['step_time_ratio_achieved']:.4f} {summary['step_time_ratio_target']:.4f}\n")
        return path


ROOT = os.path.dirname(os.path.abspath(__file__))


def code_state(root: str = ROOT) -> Dict[str, Optional[object]]:
    """The git commit of the code a run ran, and whether tracked files differed from it (None for
    both outside a git checkout or without git). Results kept in git (results/: a study's summaries
    and manifest, which its own runs write) are outputs, not code, and do not count."""
    def git(*arguments: str) -> Optional[str]:
        try:
            done = subprocess.run(["git", *arguments], cwd=root, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)results") if commit else None
    return {"code_commit": commit, "code_dirty": None if changes is None else bool(changes)}


def file_sha256(path: str) -> Optional[str]:
    """sha256 of a file's bytes (None when `path` is not a file, e.g. --weights imagenet)."""
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def provenance(argv: Sequence[str], weights: str) -> Dict[str, Optional[object]]:
    """Where a run's numbers come from: code commit (and whether the tree was dirty), date, host,
    TensorFlow and Python versions, the command and the initial weights' sha256."""
    return {**code_state(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "tensorflow_version": tf.__version__,
            "python_version": platform.python_version(),
            "command": shlex.join(["python", "main.py", *argv]), "weights_sha256": file_sha256(weights)}


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
