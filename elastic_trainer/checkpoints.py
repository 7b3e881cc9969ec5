"""Checkpoints of a training run: everything needed to continue it where it stopped.

One `tf.train.Checkpoint`, written atomically by a `tf.train.CheckpointManager` (the last KEEP
kept), holds the model's and the optimizer's variables (hence the schedules' position), the states
of the augmentation and dropout generators (which Keras leaves out) and the loop's state as JSON
(position, best accuracy, wall time, the scheme's state, the history). The data order needs no
state: epoch e is shuffled with its own seed (data.Epochs), so a resumed run skips to its position.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import logging
import os
import re
import shlex
import shutil
import time
from typing import Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

import models
from elastic_trainer.command_line import UserError
from elastic_trainer.files import read_json

STATE_VERSION = 1
KEEP = 2  # checkpoints kept per run while it trains (the newest, and one to fall back on)
# Flags that define a run: resuming with any of them changed would silently make another run.
ESSENTIAL_FLAGS = ("model_name", "dataset_name", "train_type", "input_size", "batch_size", "num_classes",
                   "optimizer", "learning_rate", "weight_decay", "num_epochs", "interval", "rho", "rho_mode",
                   "bn_mode", "seed", "weights", "probe_batches", "recalibrate", "data_dir", "gf_radius",
                   "gf_blocks", "block_range", "validation", "val_fraction", "test_every_epoch", "time_budget",
                   "eval_every", "head_init", "resolution", "memory_budget_mb", "scheme_options")
# Flags added after runs were first saved: a saved config without them had the value given here
# (runs made before --test_every_epoch existed tested every epoch).
LATER_FLAGS = {"gf_radius": 0, "gf_blocks": 0, "block_range": "", "val_fraction": 0.0, "test_every_epoch": True,
               "time_budget": 0.0, "eval_every": 1, "head_init": "glorot", "resolution": 1000, "memory_budget_mb": 0.0,
               "scheme_options": {}}


def with_later_flags(saved: Mapping) -> Dict:
    """A saved config with the settings it predates at the values its run had (LATER_FLAGS; before
    --validation, the validation split was carved when val_fraction > 0)."""
    filled = {**LATER_FLAGS, **saved}
    if "validation" not in saved:
        filled["validation"] = "carved" if (filled.get("val_fraction") or 0) > 0 else "none"
    return filled


def config_differences(saved: Mapping, current: Mapping) -> List[str]:
    """Each essential flag whose value differs between a run's saved config and a new one."""
    saved, current = with_later_flags(saved), with_later_flags(current)
    for settings in (saved, current):  # a scheme's own flags, each by its name
        settings.update({f"scheme_options.{name}": value for name, value in (settings.pop("scheme_options") or {}).items()})
    flags = [flag for flag in ESSENTIAL_FLAGS if flag != "scheme_options"]
    flags += sorted({key for key in (*saved, *current) if key.startswith("scheme_options.")})
    return [f"--{flag.split('.', 1)[-1]} was {saved.get(flag)!r}, now {current.get(flag)!r}"
            for flag in flags if saved.get(flag) != current.get(flag)]


def checkpoint_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "checkpoints")


def checkpoint_paths(directory: str) -> List[str]:
    """Checkpoint prefixes in `directory`, newest first, from the files themselves (a damaged
    'checkpoint' state file hides none of them)."""
    numbered = []
    for index in glob.glob(os.path.join(directory, "ckpt-*.index")):
        suffix = os.path.basename(index)[len("ckpt-"):-len(".index")]
        if suffix.isdigit():
            numbered.append((int(suffix), index[:-len(".index")]))
    return [path for _, path in sorted(numbered, reverse=True)]


def has_checkpoint(run_dir: str) -> bool:
    return bool(checkpoint_paths(checkpoint_dir(run_dir)))


def discard(run_dir: str) -> None:
    """Remove a finished run's checkpoints (its summary and weights files stay): nothing is left
    to resume, and a ResNet50 run's would take hundreds of MB."""
    shutil.rmtree(checkpoint_dir(run_dir), ignore_errors=True)


class RunCheckpoints:
    """Saves and restores one run's model, optimizer and loop state."""

    def __init__(self, run_dir: str, model: tf.keras.Model, optimizer, keep: int = KEEP):
        self.directory = checkpoint_dir(run_dir)
        self._state = tf.Variable("", dtype=tf.string, trainable=False, name="loop_state")
        self._checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, loop_state=self._state,
                                               random_states=models.random_states(model))
        self._keep = keep
        self._manager = tf.train.CheckpointManager(self._checkpoint, self.directory, max_to_keep=keep)
        self.last_saved = time.perf_counter()  # when this session last wrote a checkpoint (or began)

    def due(self, step: int, position: int, steps_per_epoch: int, every_steps: int) -> bool:
        """Within an epoch: whether a checkpoint is due, every `every_steps` steps (0: never; the
        epoch's end has its own, due_at_epoch_end)."""
        return bool(every_steps) and step % every_steps == 0 and position < steps_per_epoch

    def due_at_epoch_end(self, every_seconds: float) -> bool:
        """At an epoch's end: whether `every_seconds` have passed since the last checkpoint (always
        when it is not positive)."""
        return every_seconds <= 0 or time.perf_counter() - self.last_saved >= every_seconds

    def save(self, state: Dict) -> str:
        """Write a checkpoint of the current variables and `state` (JSON-able); its path."""
        state = dict(state, version=STATE_VERSION, saved_at=time.time())
        self._state.assign(json.dumps(state))
        number = int(state["step"])
        try:
            path = self._manager.save(checkpoint_number=number)
            self.last_saved = time.perf_counter()
            return path
        except (tf.errors.OpError, OSError) as error:
            for partial in glob.glob(os.path.join(self.directory, f"ckpt-{number}_temp*")):  # the unfinished write
                shutil.rmtree(partial, ignore_errors=True)
            earlier = [path for path in checkpoint_paths(self.directory) if not path.endswith(f"ckpt-{number}")]
            kept = (f"The earlier checkpoint{'s' if len(earlier) > 1 else ''} ({', '.join(map(os.path.basename, earlier))}) "
                    f"{'are' if len(earlier) > 1 else 'is'} intact." if earlier else "There is no earlier checkpoint.")
            raise UserError(f"cannot write a checkpoint to {self.directory} ({error}); free some "
                            f"space or choose another --logdir. {kept}") from None

    def restore(self) -> Dict:
        """Restore the newest checkpoint that reads back whole (falling back to older ones, with
        a warning naming the bad one); its loop state."""
        paths: Sequence[str] = checkpoint_paths(self.directory)
        if not paths:
            raise UserError(f"no checkpoint in {self.directory}: the run stopped before its first one; "
                            f"start it again without --resume")
        problems = []
        for path in paths:
            try:
                self._checkpoint.restore(path).assert_existing_objects_matched()
                state = json.loads(self._state.numpy().decode("utf-8"))
                if state.get("version") != STATE_VERSION:
                    raise ValueError(f"state version {state.get('version')}, expected {STATE_VERSION}")
            except (tf.errors.OpError, ValueError, AssertionError, KeyError, IndexError) as error:
                first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                problems.append(f"{os.path.basename(path)}: {first_line[:200]}")
                continue
            if problems:
                logging.warning("checkpoint %s is unusable (%s); resuming from the older %s",
                                problems[0].split(":")[0], problems[0].split(": ", 1)[-1], os.path.basename(path))
                self._forget_newer_than(path)
            return state
        raise UserError(f"no usable checkpoint in {self.directory} (corrupt, truncated, or of another "
                        f"model): {'; '.join(problems)}. Start the run again without --resume")

    def _forget_newer_than(self, path: str) -> None:
        """Delete the unusable checkpoints newer than `path` and make `path` the latest, so the
        next save keeps it instead of rotating it out in favour of a broken one."""
        for newer in checkpoint_paths(self.directory):
            if newer == path:
                break
            for file in glob.glob(newer + ".*"):
                os.remove(file)
        tf.compat.v1.train.update_checkpoint_state(self.directory, path, all_model_checkpoint_paths=[path])
        self._manager = tf.train.CheckpointManager(self._checkpoint, self.directory, max_to_keep=self._keep)


def check_resumable(config) -> Optional[dict]:
    """UserError unless the run can be resumed with this configuration (a TrainConfig); its summary
    when it has already finished (nothing to resume), else None."""
    run_dir = os.path.join(config.logdir, config.run_name)
    if not os.path.isdir(run_dir):
        runs = sorted(name for name in os.listdir(config.logdir)
                      if os.path.isfile(os.path.join(config.logdir, name, "config.json")))
        listing = f"; runs there: {', '.join(runs[:12])}{' ...' if len(runs) > 12 else ''}" if runs else ""
        raise UserError(f"--resume: there is no run {config.run_name!r} in {config.logdir}{listing}. "
                        f"Name it with --run_name, or start a new run without --resume")
    saved = read_json(os.path.join(run_dir, "config.json"), "the run's configuration")
    differences = config_differences(saved, dataclasses.asdict(config))
    if differences:
        raise UserError(f"--resume: run {config.run_name!r} was started with other flags: "
                        f"{'; '.join(differences)}. Resume it with its own flags, or start a new run "
                        f"without --resume")
    if os.path.exists(os.path.join(run_dir, "summary.json")):
        unfinished = sorted(name for name in os.listdir(config.logdir)
                            if re.fullmatch(re.escape(config.run_name) + r"_\d+", name)
                            and has_checkpoint(os.path.join(config.logdir, name))
                            and not os.path.exists(os.path.join(config.logdir, name, "summary.json")))
        if unfinished:
            raise UserError(f"--resume: run {config.run_name!r} has finished, but {', '.join(unfinished)} "
                            f"did not: name the one to continue with --run_name")
        return read_json(os.path.join(run_dir, "summary.json"), "the run's summary")
    if not has_checkpoint(run_dir):
        raise UserError(f"--resume: run {config.run_name!r} has no checkpoint (it stopped before the end of "
                        f"its first epoch); start it again without --resume")
    return None


def resume_command(argv: Sequence[str], run_name: str) -> str:
    """The command that continues this run: the same flags, its run name, and --resume."""
    kept, skip = [], False
    for argument in argv:
        if skip:
            skip = False
        elif argument == "--run_name":
            skip = True
        elif argument != "--resume" and not argument.startswith("--run_name="):
            kept.append(argument)
    return " ".join(shlex.quote(part) for part in ["python", "main.py", *kept, "--run_name", run_name, "--resume"])
