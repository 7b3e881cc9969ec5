"""The one training loop: it runs the compiled step of the current scheme's mask (cached per
mask) and never asks which scheme it runs (the schemes live in the `schemes` package).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from tqdm import tqdm

import models
from elastic_trainer import checkpoints, host_load
from elastic_trainer.config import TrainConfig
from elastic_trainer.deadline import RunDeadline, RunLength
from elastic_trainer.diagnostics import ChanceWarning, FirstBatches
from elastic_trainer.energy import Meter
from elastic_trainer.evaluation import Evaluations
from elastic_trainer.kept_weights import KeptWeights
from elastic_trainer.memory_stats import AllocatorPhases, reset_peak
from elastic_trainer.run_control import RunInterrupted, StopRequest, Stopwatch, diverged
from elastic_trainer.run_outputs import RunOutputs
from elastic_trainer.run_summary import (add_energy, add_step, epoch_energy, epoch_line, epoch_scalars, epoch_totals,
                                         history_entry, loop_summary, memory_summary)
from elastic_trainer.step_timing import reference_timing
from schemes import SCHEMES, Context, Scheme
from train_step import StepCache, make_evaluator, make_optimizer

@dataclasses.dataclass
class LoopState:
    """Everything the loop carries from step to step, saved in each checkpoint."""

    epoch: int = 0  # epochs finished
    position: int = 0  # batches done in the current epoch
    step: int = 0
    train_seconds: float = 0.0  # without evaluation and checkpointing
    evaluation_seconds: float = 0.0  # the per-epoch evaluations
    checkpoint_seconds: float = 0.0
    startup_seconds: float = 0.0  # from each session's process start to its first step (summed)
    process_seconds: float = 0.0  # earlier sessions' processes, up to their last checkpoint
    best_accuracy: float = 0.0  # best per-epoch test accuracy (the original's "best"; test_every_epoch)
    best_selected: float = -1.0  # best of the model-selection metric (validation when there is one)
    selection_seconds: List[float] = dataclasses.field(default_factory=list)
    selection_parts: List[Dict] = dataclasses.field(default_factory=list)  # each selection's seconds by part
    step_ms: List[float] = dataclasses.field(default_factory=list)  # steady steps of finished epochs
    first_call_ms: List[float] = dataclasses.field(default_factory=list)  # compiling calls
    history: List[Dict] = dataclasses.field(default_factory=list)
    masks: List[List[int]] = dataclasses.field(default_factory=list)  # every selection, for the image
    epoch_totals: Dict = dataclasses.field(default_factory=dict)  # the unfinished epoch's sums
    sessions: int = 1
    scheme: Dict = dataclasses.field(default_factory=dict)
    memory_peaks: Dict = dataclasses.field(default_factory=dict)  # MB: the allocator's peak per MEMORY_PHASES
    memory_selections: List[Dict] = dataclasses.field(default_factory=list)  # predicted and measured, per selection
    plan: List[List[int]] = dataclasses.field(default_factory=list)  # a deadline's [step, total steps] plannings

    @classmethod
    def restored(cls, saved: Dict, run_name: str) -> "LoopState":
        """The state a checkpoint saved (RunCheckpoints.restore), continued in a new session (said in the log)."""
        state = cls(**{key: value for key, value in saved.items() if key in cls.__dataclass_fields__})
        state.sessions += 1
        logging.info("resuming %s at epoch %d, step %d (%.1f s of training so far)", run_name, state.epoch + 1,
                     state.step, state.train_seconds)
        return state

    def checkpoint(self, scheme_state: Dict, process_seconds: float) -> Dict:
        """What a checkpoint saves: this state with the scheme's and the processes' seconds so far."""
        return dataclasses.asdict(dataclasses.replace(self, scheme=scheme_state, process_seconds=process_seconds))


def train(config: TrainConfig, model: tf.keras.Model, train_data, test_data: tf.data.Dataset,
          steps_per_epoch: int, outputs: RunOutputs, profile: Optional[Dict] = None,
          resume: bool = False, resume_command: str = "",
          val_data: Optional[tf.data.Dataset] = None, meter: Optional[Meter] = None,
          process_start: Optional[float] = None) -> Dict:
    """Train `model` with the scheme `config.train_type`; return the run's summary.

    `train_seconds` counts what a user waits for except evaluation and checkpoints: steps, data,
    selections (probe and DP) and compiling each new selection's step. Each epoch ends with
    scalars, a checkpoint when due and, every `config.eval_every` epochs and at the last, an
    evaluation on `val_data` (the model-selection split; also on the test set with
    `config.test_every_epoch`) and, with save_model, the best weights; the test set is evaluated
    once at the end (elastic_trainer/evaluation.py). `train_data` is
    a data.Epochs or a tf.data.Dataset. With `resume` training continues from the latest
    checkpoint; a signal stops it after the current step with a checkpoint, and the error names
    `resume_command`. An energy `meter` meters each epoch's steps; `process_start`
    (time.perf_counter() at the process's start) lets the summary count the whole process.
    """
    loop = Loop(config, model, train_data, steps_per_epoch, outputs, profile, resume_command, meter, val_data)
    epoch_test = test_data if config.test_every_epoch else None
    loop.start(resume, evaluation=[data for data in (epoch_test, val_data) if data is not None],
               process_start=process_start)
    with StopRequest() as stop:
        while not loop.length.finished(loop.state):
            totals = loop.train_epoch(stop)
            if not totals["seen"]:  # the deadline came with the epoch's start: no epoch to end
                break
            last = loop.length.last_epoch(loop.state)  # asked before the evaluation: the last one is always due
            metrics = loop.evaluations.epoch_end(loop.state, loop.memory, epoch_test, val_data, last)
            loop.end_epoch(totals, metrics, force_checkpoint=bool(stop.signal_number))
            if stop.signal_number and not loop.length.finished(loop.state):
                raise RunInterrupted(stop.signal_number, f"at the end of epoch {loop.state.epoch}; checkpoint written",
                                     loop.resume_command)
    loop.evaluations.late_last_epoch(loop.state, loop.memory, loop.length, epoch_test, val_data)
    loop.evaluations.final(loop.state, loop.memory, test_data)
    if loop.length.deadline is not None:
        outputs.save_config(loop.length.deadline.recorded(config))
    return loop.summary()


class Loop:
    """The steps one run's loop is made of, and the state it carries (LoopState, checkpointed)."""

    def __init__(self, config: TrainConfig, model: tf.keras.Model, train_data, steps_per_epoch: int,
                 outputs: RunOutputs, profile: Optional[Dict], resume_command: str, meter: Optional[Meter] = None,
                 val_data: Optional[tf.data.Dataset] = None):
        self.created = time.perf_counter()
        self.config, self.model, self.outputs, self.profile = config, model, outputs, profile
        self.steps_per_epoch, self.resume_command = steps_per_epoch, resume_command
        self.setup = make_optimizer(config.optimizer, config.learning_rate, config.weight_decay,
                                    steps_per_epoch * config.num_epochs, planned=bool(config.time_budget))
        self.setup.optimizer._create_all_weights(model.trainable_weights)  # slots exist, so checkpoints restore them
        self.steps = StepCache(model, self.setup.optimizer)
        context = Context(model, self.setup, config, steps_per_epoch, train_data, profile, self.steps, val_data)
        self.epochs = context.train_data
        self.scheme: Scheme = SCHEMES[config.train_type](context)
        self.steps.penalty = self.scheme.penalty
        self.checkpoints = checkpoints.RunCheckpoints(outputs.run_dir, model, self.setup.optimizer)
        outputs.mask_layout(models.block_starts(model), min(models.head_indices(model)), steps_per_epoch)
        self.state = LoopState()
        self.batch = None  # the last batch trained: the final reference timing runs on it
        self.meter = meter  # energy.Meter, when the device has one
        self.memory = AllocatorPhases(self.state.memory_peaks, self.state.memory_selections)
        self.process_start = time.perf_counter()  # this session's process start (start() may say earlier)
        self.kept = KeptWeights(model, outputs, config.save_model)  # the last good and the validation-best weights
        self.evaluations = Evaluations(make_evaluator(model), config, self.kept, outputs)
        self.setup_seconds = 0.0
        self.first_batches = FirstBatches(config.num_classes)  # their classes, reported once a session
        self.chance = ChanceWarning(config.num_classes)  # once a session
        self.length = RunLength(config.num_epochs)  # under --time_budget, start() adds the deadline's plan
        self.host_ticks = host_load.cpu_times()  # the host's steal from here to the summary; start() restarts it

    def start(self, resume: bool, evaluation: Sequence[tf.data.Dataset] = (),
              process_start: Optional[float] = None) -> None:
        """Restore the latest checkpoint (resume), or check a memory budget (`evaluation`: the
        datasets each epoch is evaluated on) and record the new run's configuration.
        `process_start`: when this process began (perf_counter), for the start-up's seconds."""
        self.process_start = self.process_start if process_start is None else process_start
        state, scheme = self.state, self.scheme
        if resume:
            saved = self.checkpoints.restore()
            self.state = state = LoopState.restored(saved, self.config.run_name)
            scheme.load_state(state.scheme)
            self.outputs.resume(saved["saved_at"], state.step, state.masks)
        else:
            scheme.check_memory_budget(evaluation)
        if self.config.time_budget:  # a new run's first plan refuses too small a budget before anything is written
            self.length = RunLength(self.config.num_epochs, RunDeadline(self.config, scheme, self.setup, self.profile,
                                                                        state, self.steps_per_epoch))
        if not resume:
            self.outputs.new_run(self.config, scheme)
            if not scheme.due(0):  # a fixed selection: shown once
                state.masks.append(scheme.mask.tolist())
        self.memory = AllocatorPhases(self.state.memory_peaks, self.state.memory_selections)  # a resumed run's
        now = time.perf_counter()
        self.state.startup_seconds += now - self.process_start
        self.setup_seconds = now - self.created  # the loop's own part of this session's start-up
        reset_peak()  # building the model and loading data are not training
        self.host_ticks = host_load.cpu_times()  # the host's steal from here to the summary (this session's)

    def save_checkpoint(self) -> str:
        with self.memory.phase(None):
            self.outputs.flush_pictures()  # before the checkpoint, which a resumed run's pictures continue from
            start = time.perf_counter()
            self.kept.save()
            path = self.checkpoints.save(self.state.checkpoint(self.scheme.state(), self.state.process_seconds
                                                               + start - self.process_start))
            self.state.checkpoint_seconds += self.checkpoints.last_saved - start
        return path

    def reselect_if_due(self) -> None:
        """The scheme's new selection when one is due (probe and DP are training time)."""
        state, scheme = self.state, self.scheme
        if not scheme.due(state.step):
            return
        with self.memory.phase("selection"):
            info, seconds, parts = scheme.timed_reselect(state.step, state.memory_selections)
            state.selection_seconds.append(seconds)
            state.selection_parts.append(parts)
        self.memory.predicted(state.step, info)
        self.outputs.selection(state.step, scheme.mask, {**info, "elastic/selection_overhead_ms": 1000 * seconds},
                               scheme.last_importance)
        state.masks.append(scheme.mask.tolist())

    def train_step(self, images, labels, totals: Dict, previous_end: float) -> None:
        """One step of the current selection, timed; its loss and accuracy added to `totals`."""
        state, scheme = self.state, self.scheme
        mask = scheme.step_mask(state.step)
        fresh = not self.steps.has(mask)  # its first call traces and compiles the step
        trainer = self.steps.get(mask)
        start = time.perf_counter()
        totals["outside_ms"].append((start - previous_end) * 1000)
        loss, logits = trainer(images, labels)
        loss_value = float(loss)  # also waits for the step to finish
        step_ms = (time.perf_counter() - start) * 1000
        if not math.isfinite(loss_value):
            raise diverged(loss_value, state.step, state.epoch, self.outputs, self.kept, self.checkpoints)
        if fresh:
            state.first_call_ms.append(step_ms)
        else:
            scheme.observe_step(step_ms)
            totals["step_ms"].append(step_ms)
        add_step(totals, loss_value, np.argmax(logits.numpy(), axis=-1), labels.numpy())
        state.step, state.position = state.step + 1, state.position + 1
        self.batch = (images, labels)
        self.memory.stepped = True

    def train_epoch(self, stop: StopRequest) -> Dict:
        """The current epoch's remaining steps; returns its totals. A checkpoint every
        `checkpoint_every` steps, and on a signal, after which it raises RunInterrupted."""
        config, state = self.config, self.state
        epoch = state.epoch
        totals = state.epoch_totals or epoch_totals()
        state.epoch_totals = totals
        clock = Stopwatch(state.train_seconds)
        joules_before = self.meter.joules() if self.meter else 0.0
        steps_before = state.position
        previous_end = clock.started
        bar = tqdm(self.epochs.epoch(epoch, skip=state.position), total=self.steps_per_epoch, initial=state.position,
                   desc=f"epoch {self.length.epoch_label(epoch + 1)}", unit="step", dynamic_ncols=True,
                   disable=None)  # no bar when not a terminal
        for index, (images, labels) in enumerate(bar):
            if index == 0:  # the input pipeline's start (an epoch's shuffle buffer filling) is no step
                self.memory.close(None)
            if self.length.ends_here(clock.seconds()):
                break  # (the epoch's start, its shuffle buffer filling, counted too)
            self.reselect_if_due()
            self.train_step(images, labels, totals, previous_end)
            self.first_batches.add(labels)
            bar.set_postfix(loss=f"{totals['loss_sum'] / totals['seen']:.3f}",
                            acc=f"{100 * totals['correct'] / totals['seen']:.1f}%", refresh=False)
            state.train_seconds = clock.seconds()
            if stop.signal_number or self.checkpoints.due(state.step, state.position, self.steps_per_epoch,
                                                          config.checkpoint_every):  # on a signal, before the evaluation
                self.outputs.writer.flush()
                with clock.paused():  # checkpointing is not training time
                    path = self.save_checkpoint()
                    if stop.signal_number:
                        bar.close()
                        raise RunInterrupted(stop.signal_number, f"at step {state.step} (epoch {epoch + 1}, "
                                             f"{state.position}/{self.steps_per_epoch}); checkpoint {path}",
                                             self.resume_command)
            previous_end = time.perf_counter()
        state.train_seconds = clock.seconds()  # with the epoch's tail
        self.first_batches.report()  # an epoch shorter than MIX_BATCHES
        if self.meter:  # the device's energy over this segment of the epoch's steps
            add_energy(totals, self.meter.joules() - joules_before, state.position - steps_before)
        bar.close()
        state.step_ms += totals["step_ms"]
        return totals

    def end_epoch(self, totals: Dict, metrics: Optional[Dict[str, float]], force_checkpoint: bool = False) -> None:
        """Model selection, the epoch's history, scalars and log line, and a checkpoint when one is
        due (`checkpoint_seconds` since the last) or forced. `metrics` None: not evaluated (--eval_every)."""
        state = self.state
        self.kept.select(state, metrics, state.epoch + 1)
        logging.info("%s", epoch_line(self.length.epoch_label(state.epoch + 1), metrics or {}, state.best_accuracy,
                                      state.train_seconds))
        self.chance.check(totals["loss_sum"] / max(totals["seen"], 1), state.epoch + 1, self.length.epochs())
        energy = epoch_energy(totals)
        state.history.append(history_entry(state.epoch + 1, state.train_seconds, totals, metrics, energy))
        scalars = epoch_scalars(state, totals, metrics or {}, energy, float(self.setup.learning_rate(state.step)),
                                self.profile and float(self.profile["T_full_ms"]), self.memory.epoch_peaks)
        self.outputs.epoch_end(state.step, scalars)
        self.memory.epoch_peaks = {}
        state.epoch, state.position, state.epoch_totals = state.epoch + 1, 0, {}
        if force_checkpoint or self.checkpoints.due_at_epoch_end(self.config.checkpoint_seconds):
            self.save_checkpoint()

    def summary(self) -> Dict:
        """The run's summary, with the final selection timed against a full step now."""
        config, state, scheme = self.config, self.state, self.scheme
        batch = self.batch or next(iter(self.epochs.epoch(0)))  # resumed after the last epoch's checkpoint: a fresh one
        reference = reference_timing(self.steps, self.setup.optimizer, scheme.step_mix(), batch, config.reference_steps)
        summary = loop_summary(config, scheme, self.profile, state, reference, self.evaluations.final_test, self.setup_seconds,
                               time.perf_counter() - self.process_start, self.meter)
        summary.update(**self.length.facts(), **memory_summary(config, self.memory.run_peaks(), state.memory_selections),
                       host_steal_share=host_load.steal_share(self.host_ticks, host_load.cpu_times()))
        return summary
