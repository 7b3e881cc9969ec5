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
from elastic_trainer import checkpoints
from elastic_trainer.config import TrainConfig
from elastic_trainer.deadline import RunDeadline
from elastic_trainer.diagnostics import FirstBatches, at_chance
from elastic_trainer.energy import Meter
from elastic_trainer.memory_stats import AllocatorPhases, reset_peak
from elastic_trainer.run_control import RunInterrupted, StopRequest, Stopwatch, TrainingDiverged
from elastic_trainer.run_outputs import RunOutputs
from elastic_trainer.run_summary import (compile_seconds, energy_summary, epoch_energy, epoch_scalars, history_entry, memory_summary,
                         mixed_reference, selected_epoch, summarize)
from elastic_trainer.step_timing import measure_reference
from schemes import SCHEMES, Context, Scheme, classifier_mask
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


def train(config: TrainConfig, model: tf.keras.Model, train_data, test_data: tf.data.Dataset,
          steps_per_epoch: int, outputs: RunOutputs, profile: Optional[Dict] = None,
          resume: bool = False, resume_command: str = "",
          val_data: Optional[tf.data.Dataset] = None, meter: Optional[Meter] = None,
          process_start: Optional[float] = None) -> Dict:
    """Train `model` with the scheme `config.train_type`; return the run's summary.

    `train_seconds` counts what a user waits for except evaluation and checkpoints: steps, data,
    selections (probe and DP) and compiling each new selection's step. Each epoch ends with an
    evaluation on `val_data` (the model-selection split; also on the test set with
    `config.test_every_epoch`), scalars, a checkpoint when due and, with save_model, the best
    weights; the test set is evaluated once at the end (`Loop.final_evaluation`). `train_data` is
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
        while not loop.finished():
            totals = loop.train_epoch(stop)
            if not totals["seen"]:  # the deadline came with the epoch's start: no epoch to end
                break
            metrics = loop.evaluate_epoch(epoch_test, val_data)
            loop.end_epoch(totals, metrics, force_checkpoint=bool(stop.signal_number))
            if stop.signal_number and not loop.finished():
                raise RunInterrupted(stop.signal_number, f"at the end of epoch {loop.state.epoch}; checkpoint written",
                                     loop.resume_command)
    loop.final_evaluation(test_data)
    if loop.deadline is not None:
        outputs.save_config(loop.deadline.recorded(config))
    return loop.summary()


class Loop:
    """The steps one run's loop is made of, and the state it carries (LoopState, checkpointed)."""

    def __init__(self, config: TrainConfig, model: tf.keras.Model, train_data, steps_per_epoch: int,
                 outputs: RunOutputs, profile: Optional[Dict], resume_command: str, meter: Optional[Meter] = None,
                 val_data: Optional[tf.data.Dataset] = None):
        self.created = time.perf_counter()
        self.config, self.model, self.outputs, self.profile = config, model, outputs, profile
        self.steps_per_epoch, self.resume_command = steps_per_epoch, resume_command
        self.evaluate = make_evaluator(model)
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
        self.final_test: Dict = {}  # final_evaluation's results
        self.last_good: Optional[tuple] = None  # (epoch, weights) at the end of the last finite epoch
        self.best_weights: Optional[tuple] = None  # (epoch, weights) of the validation-best epoch so far
        self.best_unsaved = False  # best_weights changed since the last checkpoint
        self.last_checkpoint = time.perf_counter()  # when this session last wrote a checkpoint
        self.setup_seconds = 0.0
        self.first_batches = FirstBatches(config.num_classes)  # their classes, reported once a session
        self.warned_at_chance = False  # diagnostics.at_chance, once a session
        self.deadline: Optional[RunDeadline] = None  # the run's plan under --time_budget (start() makes it)

    def start(self, resume: bool, evaluation: Sequence[tf.data.Dataset] = (),
              process_start: Optional[float] = None) -> None:
        """Restore the latest checkpoint (resume), or check a memory budget (`evaluation`: the
        datasets each epoch is evaluated on) and record the new run's configuration.
        `process_start`: when this process began (perf_counter), for the start-up's seconds."""
        if process_start is not None:
            self.process_start = process_start
        state, scheme = self.state, self.scheme
        if resume:
            saved = self.checkpoints.restore()
            self.state = state = LoopState(**{k: v for k, v in saved.items() if k in LoopState.__dataclass_fields__})
            state.sessions += 1
            scheme.load_state(state.scheme)
            self.outputs.resume(saved["saved_at"], state.step, state.masks)
            logging.info("resuming %s at epoch %d, step %d (%.1f s of training so far)", self.config.run_name,
                         state.epoch + 1, state.step, state.train_seconds)
        else:
            self.check_memory_budget(evaluation)
        if self.config.time_budget:  # a new run's first plan refuses too small a budget before anything is written
            self.deadline = RunDeadline(self.config, scheme, self.setup, self.profile, state, self.steps_per_epoch)
        if not resume:
            self.outputs.save_config(self.config)
            self.outputs.hparams(self.config, budgeted=scheme.needs_profile, periodic=scheme.reselects)
            if not scheme.due(0):  # a fixed selection: show it once
                self.outputs.selection_mask(0, scheme.mask)
                state.masks.append(scheme.mask.tolist())
        self.memory = AllocatorPhases(self.state.memory_peaks, self.state.memory_selections)  # a resumed run's
        now = time.perf_counter()
        self.state.startup_seconds += now - self.process_start
        self.setup_seconds = now - self.created  # the loop's own part of this session's start-up
        reset_peak()  # building the model and loading data are not training

    def check_memory_budget(self, evaluation: Sequence[tf.data.Dataset]) -> None:
        """Under a memory budget, refuse one that cannot pay for a classifier-only step before the
        run writes anything. What the allocator holds is read as it will be during training: with
        the input pipeline's buffers filled (an epoch's and the probes' shuffle buffers hold the
        whole training split when it is cached) and the evaluation datasets' in-memory caches made
        (a pass over each; after the first epoch's evaluation they stay, and would otherwise push
        the first selection's steps over the budget by their size)."""
        if not self.scheme.memory_budgeted:
            return
        for dataset in evaluation:
            for _ in dataset:
                pass
        batches = iter(self.epochs.epoch(0))
        next(batches)
        self.epochs.probe(0, 1)
        self.scheme.check_memory(classifier_mask(self.model))
        del batches

    def finished(self) -> bool:
        """Whether the run has taken its epochs, or its deadline's steps."""
        if self.deadline is not None:
            return self.deadline.ends_here(self.state.train_seconds)
        return self.state.epoch >= self.config.num_epochs

    @property
    def planned_epochs(self) -> int:
        return self.deadline.epochs() if self.deadline is not None else self.config.num_epochs

    def epoch_label(self, epoch_number: int) -> str:
        """Epoch `epoch_number` of the run, for the log: "3/12", or under a deadline the plan's estimate."""
        if self.deadline is not None:
            return self.deadline.epoch_label(epoch_number)
        return f"{epoch_number}/{self.config.num_epochs}"

    def save_checkpoint(self) -> str:
        with self.memory.phase(None):
            self.outputs.flush_pictures()  # before the checkpoint, which a resumed run's pictures continue from
            start = time.perf_counter()
            if self.best_unsaved:  # a resumed run's final test needs the validation-best weights
                self.outputs.save_best_validation(*self.best_weights)
                self.best_unsaved = False
            saved = dataclasses.replace(self.state, scheme=self.scheme.state(),
                                        process_seconds=self.state.process_seconds + start - self.process_start)
            path = self.checkpoints.save(dataclasses.asdict(saved))
            self.last_checkpoint = time.perf_counter()
            self.state.checkpoint_seconds += self.last_checkpoint - start
        return path

    def reselect_if_due(self) -> None:
        """The scheme's new selection when one is due (probe and DP are training time)."""
        state, scheme = self.state, self.scheme
        if not scheme.due(state.step):
            return
        with self.memory.phase("selection"):
            if state.memory_selections:
                scheme.observe_memory(state.memory_selections[-1])
            start, before = time.perf_counter(), dict(scheme.overhead)
            info = scheme.reselect(state.step)
            state.selection_seconds.append(time.perf_counter() - start)
            state.selection_parts.append({part: seconds - before.get(part, 0.0)
                                          for part, seconds in scheme.overhead.items()
                                          if seconds - before.get(part, 0.0) > 0})
        if "memory/predicted_peak_mb" in info:
            state.memory_selections.append({"step": state.step, "predicted_mb": info["memory/predicted_peak_mb"],
                                            "base_mb": info["memory/base_mb"],
                                            **({"probe_chunks": info["memory/probe_chunks"]}
                                               if "memory/probe_chunks" in info else {})})
        self.outputs.scalars(state.step, {**info, "elastic/selection_overhead_ms": 1000 * state.selection_seconds[-1]})
        self.outputs.selection_mask(state.step, scheme.mask)
        if scheme.last_importance is not None:
            self.outputs.importance(state.step, scheme.last_importance)
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
            raise self.diverged(loss_value)
        if fresh:
            state.first_call_ms.append(step_ms)
        else:
            scheme.observe_step(step_ms)
            totals["step_ms"].append(step_ms)
        totals["loss_sum"] += loss_value * len(labels)
        totals["correct"] += int(np.sum(np.argmax(logits.numpy(), axis=-1) == labels.numpy()))
        totals["seen"] += len(labels)
        state.step += 1
        state.position += 1
        self.batch = (images, labels)
        self.memory.stepped = True

    def diverged(self, loss_value: float) -> TrainingDiverged:
        """The error to raise when the loss stopped being finite; first it writes the weights of
        the last finite epoch (kept in memory, or the last checkpoint's) to last_good.h5."""
        epoch = self.state.epoch
        self.outputs.flush_pictures()
        self.outputs.session_end(succeeded=False)  # the HParams dashboard's status: Failure
        if self.last_good is not None:
            self.model.set_weights(self.last_good[1])
            when = f"end of epoch {self.last_good[0]}"
        elif checkpoints.has_checkpoint(self.outputs.run_dir):
            when = f"the last checkpoint, step {self.checkpoints.restore()['step']}"
        else:
            when = None
        kept = (f"the last good weights ({when}) are kept in {self.outputs.checkpoint(self.model)}" if when
                else "no epoch finished, so there are no weights to keep")
        return TrainingDiverged(f"the loss became {loss_value} at step {self.state.step + 1} (epoch {epoch + 1}); "
                                f"training stopped and {kept}. Try a lower --learning_rate.")

    def train_epoch(self, stop: StopRequest) -> Dict:
        """The current epoch's remaining steps; returns its totals. A checkpoint every
        `checkpoint_every` steps, and on a signal, after which it raises RunInterrupted."""
        config, state = self.config, self.state
        epoch = state.epoch
        totals = state.epoch_totals or {"loss_sum": 0.0, "correct": 0, "seen": 0, "step_ms": [], "outside_ms": []}
        state.epoch_totals = totals
        clock = Stopwatch(state.train_seconds)
        joules_before = self.meter.joules() if self.meter else 0.0
        steps_before = state.position
        previous_end = clock.started
        bar = tqdm(self.epochs.epoch(epoch, skip=state.position), total=self.steps_per_epoch, initial=state.position,
                   desc=f"epoch {self.epoch_label(epoch + 1)}", unit="step", dynamic_ncols=True,
                   disable=None)  # no bar when not a terminal
        for index, (images, labels) in enumerate(bar):
            if index == 0:  # the input pipeline's start (an epoch's shuffle buffer filling) is no step
                self.memory.close(None)
            if self.deadline is not None and self.deadline.ends_here(clock.seconds()):
                break  # (the epoch's start, its shuffle buffer filling, counted too)
            self.reselect_if_due()
            self.train_step(images, labels, totals, previous_end)
            self.first_batches.add(labels)
            bar.set_postfix(loss=f"{totals['loss_sum'] / totals['seen']:.3f}",
                            acc=f"{100 * totals['correct'] / totals['seen']:.1f}%", refresh=False)
            state.train_seconds = clock.seconds()
            periodic = (config.checkpoint_every and state.step % config.checkpoint_every == 0
                        and state.position < self.steps_per_epoch)  # the epoch's end has its own
            if periodic or stop.signal_number:  # on a signal, before the epoch's evaluation
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
            totals["energy_joules"] = totals.get("energy_joules", 0.0) + self.meter.joules() - joules_before
            totals["energy_steps"] = totals.get("energy_steps", 0) + state.position - steps_before
        bar.close()
        state.step_ms += totals["step_ms"]
        return totals

    def evaluate_epoch(self, test_data: Optional[tf.data.Dataset],
                       val_data: Optional[tf.data.Dataset]) -> Dict[str, float]:
        """Validation (and, given `test_data`, test) loss and accuracy; not training time."""
        with self.memory.phase("evaluation"):
            start = time.perf_counter()
            metrics = self.evaluate(test_data) if test_data is not None else {}
            if val_data is not None:
                metrics.update(self.evaluate(val_data, "validation"))
            self.state.evaluation_seconds += time.perf_counter() - start
        return metrics

    def end_epoch(self, totals: Dict, metrics: Dict[str, float], force_checkpoint: bool = False) -> None:
        """Model selection, the epoch's history, scalars and log line, and a checkpoint when one is
        due (`checkpoint_seconds` since the last) or forced."""
        state = self.state
        self.select_model(metrics)
        self.log_epoch(metrics, totals["loss_sum"] / max(totals["seen"], 1))
        energy = epoch_energy(totals)
        state.history.append(history_entry(state.epoch + 1, state.train_seconds, totals, metrics, energy))
        scalars = epoch_scalars(state, totals, metrics, energy, float(self.setup.learning_rate(state.step)),
                                self.profile and float(self.profile["T_full_ms"]), self.memory.epoch_peaks)
        self.outputs.flush_pictures()  # the epoch's selections, drawn outside training time
        self.outputs.scalars(state.step, scalars)
        self.memory.epoch_peaks = {}
        state.epoch, state.position, state.epoch_totals = state.epoch + 1, 0, {}
        if (force_checkpoint or self.config.checkpoint_seconds <= 0
                or time.perf_counter() - self.last_checkpoint >= self.config.checkpoint_seconds):
            self.save_checkpoint()

    def select_model(self, metrics: Dict[str, float]) -> None:
        """Keep the epoch's weights as the last good ones, and as the best when its validation (else
        test) accuracy is the best so far: in memory for the final test, on disk with save_model."""
        state, epoch = self.state, self.state.epoch
        validated, tested = "validation/accuracy" in metrics, "test/accuracy" in metrics
        if tested:
            state.best_accuracy = max(state.best_accuracy, metrics["test/accuracy"])
        weights = self.model.get_weights()  # a copy in memory, ~10 ms for MobileNetV2 (a file: ~100 ms)
        self.last_good = (epoch + 1, weights)
        selected = metrics.get("validation/accuracy", metrics.get("test/accuracy"))
        if selected is None or selected > state.best_selected:  # the first epoch of the best, as summarize() picks
            state.best_selected = -1.0 if selected is None else selected  # nothing to select on: the latest
            if validated and not tested:  # the test set sees these weights after the last epoch
                self.best_weights, self.best_unsaved = (epoch + 1, weights), True
            if self.config.save_model:
                self.outputs.save_best(self.model)

    def log_epoch(self, metrics: Dict[str, float], train_loss: float) -> None:
        """The epoch's log line; once a session, a warning when the training loss is still at chance
        a third of the way in (diagnostics.at_chance)."""
        state, epochs_done = self.state, self.state.epoch + 1
        accuracies = ([f"validation accuracy {100 * metrics['validation/accuracy']:.2f}%"]
                      if "validation/accuracy" in metrics else []) + (
            [f"test accuracy {100 * metrics['test/accuracy']:.2f}% (best {100 * state.best_accuracy:.2f}%)"]
            if "test/accuracy" in metrics else [])
        logging.info("epoch %s: %s%.1f s of training", self.epoch_label(epochs_done),
                     "".join(f"{text}, " for text in accuracies), state.train_seconds)
        warning = None if self.warned_at_chance else at_chance(train_loss, self.config.num_classes, epochs_done,
                                                                self.planned_epochs)
        if warning:
            self.warned_at_chance = True
            logging.warning("warning: %s", warning)

    def final_evaluation(self, test_data: tf.data.Dataset) -> None:
        """The test set, once, after the last epoch: on the final weights and on the weights of
        the validation-best epoch (kept by end_epoch); their accuracies go to the summary and to
        TensorBoard at the last step. With test_every_epoch the epochs' evaluations have both."""
        if self.config.test_every_epoch:
            return
        state = self.state
        best_epoch = selected_epoch(state.history)["best_val_epoch"]
        with self.memory.phase("evaluation"):
            start = time.perf_counter()
            final = self.evaluate(test_data)["test/accuracy"]
            at_best = final if best_epoch in (None, len(state.history)) else None
            if at_best is None:
                best = self.best_weights or self.outputs.load_best_validation()
                if best is not None and best[0] == best_epoch:
                    final_weights = self.model.get_weights()
                    self.model.set_weights(best[1])
                    at_best = self.evaluate(test_data)["test/accuracy"]
                    self.model.set_weights(final_weights)
                else:  # not kept (a run resumed from a checkpoint written before this code kept them)
                    logging.warning("the weights of epoch %d (best validation accuracy) were not kept: no test "
                                    "accuracy at the validation-best epoch", best_epoch)
            seconds = time.perf_counter() - start
        self.final_test = {"final_test_accuracy": final, "final_test_seconds": seconds,
                           **({"test_accuracy_at_best_val": at_best} if best_epoch is not None else {})}
        self.outputs.scalars(state.step, {"time/final_test_seconds": seconds})  # the accuracies: RunOutputs.summary
        logging.info("test accuracy: %.2f%% with the final weights%s", 100 * final,
                     f", {100 * at_best:.2f}% with epoch {best_epoch}'s (best validation accuracy)"
                     if at_best is not None else "")

    def summary(self) -> Dict:
        """The run's summary, with the final selection timed against a full step now."""
        config, state, scheme = self.config, self.state, self.scheme
        batch = self.batch
        if batch is None:  # resumed after the last epoch's checkpoint: time the reference on a fresh batch
            batch = next(iter(self.epochs.epoch(0)))
        reference = {}
        mix = [(mask, share) for mask, share in scheme.step_mix() if share > 0]
        if config.reference_steps and not all(mask.all() for mask, _ in mix):
            reference = mixed_reference([(measure_reference(self.steps, self.setup.optimizer, mask, batch,
                                                            config.reference_steps), share) for mask, share in mix])
        summary = summarize(config, scheme, self.profile, state.best_accuracy if config.test_every_epoch else None,
                            state.train_seconds, state.selection_seconds,
                            state.step_ms, compile_seconds(state.first_call_ms, state.step_ms),
                            state.evaluation_seconds, state.history, reference, self.final_test,
                            median_ms=scheme.typical_step_ms(state.step_ms))
        summary.update(checkpoint_seconds=state.checkpoint_seconds, sessions=state.sessions,
                       startup_seconds=state.startup_seconds, loop_setup_seconds=self.setup_seconds,
                       process_seconds=state.process_seconds + time.perf_counter() - self.process_start,
                       selection_parts=dict(scheme.overhead), selection_parts_each=list(state.selection_parts),
                       first_call_ms=list(state.first_call_ms), **energy_summary(state.history, self.meter),
                       **scheme.facts,
                       **({"deadline": self.deadline.facts()} if self.deadline is not None else {}),
                       **memory_summary(config, self.memory.run_peaks(), state.memory_selections))
        return summary
