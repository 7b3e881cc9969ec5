"""A run's TensorBoard event files read back: cut to a checkpoint's moment when a run resumes, and
the selections it logged as text."""
from __future__ import annotations

import glob
import os
from typing import List, Optional, Tuple

import tensorflow as tf

from elastic_trainer.record_names import SELECTION_TAG


def truncate_events(run_dir: str, until: float, last_step: Optional[int] = None) -> int:
    """Keep only the events of `run_dir` written at or before `until` (wall time) and, when given, at
    steps up to `last_step` (in case the clock stepped back), rewritten atomically into one file; a
    record cut short by a crash ends its file. Returns how many events were dropped."""
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


def logged_selections(run_dir: str) -> List[Tuple[int, str]]:
    """(step, "0110...") of each selection logged as text in `run_dir`'s events, in step order."""
    from tensorboard.backend.event_processing import event_accumulator

    events = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0})
    events.Reload()
    if SELECTION_TAG not in events.Tags()["tensors"]:
        return []
    return sorted((event.step, tf.make_ndarray(event.tensor_proto).item().decode())
                  for event in events.Tensors(SELECTION_TAG))
