"""A run's summary: its arithmetic (accuracy, where the wall time went, the step time against a
full step, memory and energy) from what the loop recorded, and the block the terminal prints.
summary.json holds the first; `report` prints it, for a finished run as for a resumed one."""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from elastic_trainer.config import TrainConfig

OVERHEAD_HINT_SHARE = 0.15  # above this share of probes and compiles, the summary suggests a longer --interval


def overhead_share(compile_s: float, selection_seconds: Sequence[float], train_seconds: float) -> float:
    """The share of a run's training wall time spent selecting (probes, DP) and compiling steps;
    every run pays its first step's compile, so full training's share is not zero."""
    return (compile_s + sum(selection_seconds)) / train_seconds if train_seconds else 0.0


def compile_seconds(first_call_ms: Sequence[float], step_ms: Sequence[float]) -> float:
    """Time the first calls of new selections' steps took beyond an ordinary step (tracing and
    compiling), in seconds."""
    typical = float(np.median(step_ms)) if len(step_ms) else 0.0
    return sum(max(0.0, first - typical) for first in first_call_ms) / 1000


def epoch_energy(totals: Dict) -> Dict[str, float]:
    """An epoch's metered energy as TensorBoard scalars (none when the device has no meter)."""
    if "energy_joules" not in totals:
        return {}
    return {"energy/epoch_joules": totals["energy_joules"],
            "energy/joules_per_step": totals["energy_joules"] / max(totals["energy_steps"], 1)}


def epoch_scalars(state, totals: Dict, metrics: Dict[str, float], energy: Dict[str, float],
                  learning_rate: float, full_step_ms: Optional[float], memory_peaks: Dict[str, float]
                  ) -> Dict[str, float]:
    """An epoch's TensorBoard scalars: training accuracy and loss, step times (against the
    profile's `full_step_ms`), where the time went, energy, the evaluation's metrics and the
    allocator's peaks. `state`: the loop's (train.LoopState)."""
    seen = max(totals["seen"], 1)
    compiling = compile_seconds(state.first_call_ms, state.step_ms)
    step_ms = float(np.median(totals["step_ms"])) if totals["step_ms"] else 0.0
    return {
        "train/accuracy": totals["correct"] / seen, "train/classification_loss": totals["loss_sum"] / seen,
        "train/learning_rate": learning_rate, "step_time/median_ms": step_ms,
        **({"step_time/ratio": step_ms / full_step_ms} if full_step_ms and step_ms else {}),
        "time/between_steps_ms": float(np.median(totals["outside_ms"])) if totals["outside_ms"] else 0.0,
        "time/compile_seconds": compiling,
        "time/selection_seconds": sum(state.selection_seconds),
        "time/overhead_share": overhead_share(compiling, state.selection_seconds, state.train_seconds),
        "time/evaluation_seconds": state.evaluation_seconds,
        "time/train_seconds": state.train_seconds, **energy, **metrics,
        **{f"memory/{phase}_peak_mb": peak for phase, peak in memory_peaks.items()}}


def epoch_totals() -> Dict:
    """A new epoch's sums, which the loop adds each step to (add_step) and checkpoints."""
    return {"loss_sum": 0.0, "correct": 0, "seen": 0, "step_ms": [], "outside_ms": []}


def add_step(totals: Dict, loss_value: float, predicted: np.ndarray, labels: np.ndarray) -> None:
    """A training step's loss (its batch's mean) and correct predictions added to an epoch's `totals`."""
    totals["loss_sum"] += loss_value * len(labels)
    totals["correct"] += int(np.sum(predicted == labels))
    totals["seen"] += len(labels)


def add_energy(totals: Dict, joules: float, steps: int) -> None:
    """The energy metered over a segment of an epoch's steps, added to its `totals`."""
    totals["energy_joules"] = totals.get("energy_joules", 0.0) + joules
    totals["energy_steps"] = totals.get("energy_steps", 0) + steps


def history_entry(epoch: int, train_seconds: float, totals: Dict, metrics: Optional[Dict[str, float]],
                  energy: Dict[str, float]) -> Dict:
    """An epoch's line of the summary's history: its training loss, validation and test accuracy
    (when evaluated; `metrics` None: an epoch --eval_every skipped, recorded as "evaluated": false),
    the training seconds so far, and its energy (when metered)."""
    return {"epoch": epoch, "train_seconds": train_seconds, "train_loss": totals["loss_sum"] / max(totals["seen"], 1),
            **(evaluation_fields(metrics) if metrics is not None else {"evaluated": False}),
            **({"energy_joules": energy["energy/epoch_joules"], "energy_steps": totals["energy_steps"]}
               if energy else {})}


def evaluation_fields(metrics: Dict[str, float]) -> Dict[str, float]:
    """An evaluated epoch's accuracies as its history entry holds them (test_accuracy, val_accuracy)."""
    return {**({"test_accuracy": metrics["test/accuracy"]} if "test/accuracy" in metrics else {}),
            **({"val_accuracy": metrics["validation/accuracy"]} if "validation/accuracy" in metrics else {})}


def energy_summary(history: Sequence[Dict], meter) -> Dict:
    """Training energy over the metered epochs (whole device, steps only): joules and joules per
    step; empty when no epoch was metered."""
    metered = [entry for entry in history if "energy_joules" in entry]
    if not metered:
        return {}
    joules, steps = sum(entry["energy_joules"] for entry in metered), sum(entry["energy_steps"] for entry in metered)
    return {"energy_meter": meter.name if meter else None, "energy_joules": joules,
            "joules_per_step": joules / max(steps, 1), "energy_epochs_metered": len(metered)}


def memory_summary(config: TrainConfig, peaks: Dict[str, Optional[float]], selections: Sequence[Dict]) -> Dict:
    """The allocator's `peaks` (MB per phase over the run; None where it kept no statistics), and
    under a memory budget the predicted and measured step peak of every selection."""
    predicted = [entry["predicted_mb"] for entry in selections]
    return {"memory_budget_mb": config.memory_budget_mb or None,
            **{f"measured_{phase}_peak_mb": peak for phase, peak in peaks.items()},
            "predicted_step_peak_mb": max(predicted) if predicted else None,
            "memory_selections": list(selections)}


def mixed_reference(parts: Sequence[Tuple[Dict[str, float], float]]) -> Dict[str, float]:
    """measure_reference's results for several selections, each with its share of the steps, as
    one: the selections' step times weighted by their shares, the full steps' averaged, the
    seconds summed (one selection: its result as it is)."""
    if len(parts) == 1:
        return parts[0][0]
    total = sum(share for _, share in parts)
    return {"reference_full_step_ms": float(np.mean([part["reference_full_step_ms"] for part, _ in parts])),
            "reference_selection_step_ms": sum(part["reference_selection_step_ms"] * share
                                               for part, share in parts) / total,
            "reference_seconds": sum(part["reference_seconds"] for part, _ in parts)}


def summarize(config: TrainConfig, scheme, profile: Optional[Dict], best_accuracy: Optional[float],
              train_seconds: float, selection_seconds: Sequence[float], step_ms: Sequence[float],
              compile_s: float = 0.0, evaluation_seconds: float = 0.0, history: Sequence[Dict] = (),
              reference: Optional[Dict[str, float]] = None, final_test: Optional[Dict] = None,
              median_ms: Optional[float] = None) -> Dict:
    """The run's summary: accuracy, wall time and where it went, and step time relative to a
    full step (the profile's, and one measured live at the end of the run when `reference`).
    Test accuracies come from the epochs' history (test_every_epoch) or from `final_test`
    (evaluation.Evaluations.final); `best_accuracy` (over epochs) is None without per-epoch tests.
    `scheme`: the run's (schemes.Scheme), for its target and whether its step is a full one.
    `median_ms`: the run's typical step (Scheme.typical_step_ms), by default the steps' median."""
    if median_ms is None:
        median_ms = float(np.median(step_ms)) if len(step_ms) else float("nan")
    full_ms = float(profile["T_full_ms"]) if profile else float("nan")
    target = scheme.step_ratio_target(config)
    reference = dict(reference or {})
    if "reference_full_step_ms" in reference:  # final selection vs full, timed together
        live = reference["reference_selection_step_ms"] / reference["reference_full_step_ms"]
    else:
        live = 1.0 if scheme.full_step else float("nan")
    return {"run_name": config.run_name, "train_type": config.train_type,
            "rho": config.rho if scheme.needs_profile else None,  # others ignore rho
            "rho_mode": config.rho_mode if scheme.needs_profile else None,
            "bn_mode": config.bn_mode, "seed": config.seed,
            "test_every_epoch": config.test_every_epoch, "best_test_accuracy": best_accuracy,
            "final_test_accuracy": history[-1].get("test_accuracy") if history else None,
            "train_time_hours": train_seconds / 3600,
            "train_seconds": train_seconds, "median_step_ms": median_ms,
            "step_time_ratio_achieved": median_ms / full_ms,
            "step_time_ratio_live": live,
            "step_time_ratio_target": target,
            "selection_seconds": list(selection_seconds),
            "selection_overhead_share": sum(selection_seconds) / train_seconds if train_seconds else 0.0,
            "compile_seconds": compile_s,
            "compile_share": compile_s / train_seconds if train_seconds else 0.0,
            "overhead_share": overhead_share(compile_s, selection_seconds, train_seconds),
            "evaluation_seconds": evaluation_seconds,
            **selected_epoch(history), **dict(final_test or {}), **reference, "history": list(history)}


def loop_summary(config: TrainConfig, scheme, profile: Optional[Dict], state, reference: Dict[str, float],
                 final_test: Dict, loop_setup_seconds: float, session_seconds: float, meter) -> Dict:
    """summarize() over what the loop recorded in `state` (train.LoopState), with the sessions'
    times (`session_seconds`: this session's process so far), the selections' parts, the
    compiling calls, energy (`meter`: energy.Meter or None) and the scheme's own facts."""
    summary = summarize(config, scheme, profile, state.best_accuracy if config.test_every_epoch else None,
                        state.train_seconds, state.selection_seconds,
                        state.step_ms, compile_seconds(state.first_call_ms, state.step_ms),
                        state.evaluation_seconds, state.history, reference, final_test,
                        median_ms=scheme.typical_step_ms(state.step_ms))
    summary.update(checkpoint_seconds=state.checkpoint_seconds, sessions=state.sessions,
                   startup_seconds=state.startup_seconds, loop_setup_seconds=loop_setup_seconds,
                   process_seconds=state.process_seconds + session_seconds,
                   selection_parts=dict(scheme.overhead), selection_parts_each=list(state.selection_parts),
                   first_call_ms=list(state.first_call_ms), **energy_summary(state.history, meter),
                   **scheme.facts)
    return summary


def epoch_line(label: str, metrics: Dict[str, float], best_accuracy: float, train_seconds: float) -> str:
    """An epoch's log line: "epoch 3/12: validation accuracy 61.20%, 42.0 s of training" (and the test
    accuracy with the best so far, when tested)."""
    accuracies = ([f"validation accuracy {100 * metrics['validation/accuracy']:.2f}%"]
                  if "validation/accuracy" in metrics else []) + (
        [f"test accuracy {100 * metrics['test/accuracy']:.2f}% (best {100 * best_accuracy:.2f}%)"]
        if "test/accuracy" in metrics else [])
    return f"epoch {label}: " + "".join(f"{text}, " for text in accuracies) + f"{train_seconds:.1f} s of training"


def selected_epoch(history: Sequence[Dict]) -> Dict:
    """Model selection on the validation split: the first epoch of best validation accuracy, its
    validation and test accuracy (all None when the run had no validation split)."""
    validated = [entry for entry in history if "val_accuracy" in entry]
    if not validated:
        return {"best_val_epoch": None, "best_val_accuracy": None, "test_accuracy_at_best_val": None}
    best = max(validated, key=lambda entry: entry["val_accuracy"])  # max keeps the first of ties
    return {"best_val_epoch": best["epoch"], "best_val_accuracy": best["val_accuracy"],
            "test_accuracy_at_best_val": best.get("test_accuracy")}


def report(summary: dict, txt_path: Optional[str]) -> None:
    """Print the run's summary."""
    achieved, target = summary["step_time_ratio_achieved"], summary["step_time_ratio_target"]
    speed = (f"step time {achieved:.3f} x the profiled full step ({1 / achieved:.2f}x faster)"
             if math.isfinite(achieved) else "step time vs profiled full step: n/a (no matching profile)")
    if math.isfinite(target) and math.isfinite(achieved):
        speed += f"; target {target:.3f} ({1 / target:.2f}x)"
    evaluation = [f"per-epoch evaluation took {summary['evaluation_seconds']:.1f} s more"]
    if summary.get("final_test_seconds") is not None:
        evaluation.append(f"the final test {summary['final_test_seconds']:.1f} s")
    evaluation = ", ".join(evaluation)
    lines = [f"Training type:        {summary['train_type']}",
             f"Final test accuracy:  {100 * summary['final_test_accuracy']:.2f} % (the last epoch's weights)",
             *([f"Selected epoch:       {summary['best_val_epoch']} (best validation accuracy "
                f"{100 * summary['best_val_accuracy']:.2f} %): test accuracy " +
                (f"{100 * summary['test_accuracy_at_best_val']:.2f} %"
                 if summary.get("test_accuracy_at_best_val") is not None else "n/a (its weights were not kept)")]
               if summary.get("best_val_epoch") else []),
             *([f"Best test accuracy:   {100 * summary['best_test_accuracy']:.2f} % (over epochs, as the paper reports)"]
               if summary.get("best_test_accuracy") is not None else []),
             f"Training wall time:   {summary['train_time_hours']:.4f} h "
             f"({summary['train_seconds']:.1f} s, evaluation excluded; {evaluation})",
             *([f"Whole process:        {summary['process_seconds']:.1f} s (start-up "
                f"{summary['startup_seconds']:.1f} s, checkpoints {summary['checkpoint_seconds']:.1f} s, "
                f"reference timing {summary.get('reference_seconds', 0.0):.1f} s included)"]
               if "process_seconds" in summary else []),
             f"Speed:                {speed}"]
    live = summary["step_time_ratio_live"]
    if "reference_full_step_ms" in summary and math.isfinite(live):
        lines.append(f"Measured live:        final selection {summary['reference_selection_step_ms']:.1f} ms "
                     f"= {live:.3f} x a full step ({summary['reference_full_step_ms']:.1f} ms), timed "
                     f"together after training ({1 / live:.2f}x faster)")
    lines += overhead_lines(summary)
    if summary.get("deadline"):
        plan = summary["deadline"]
        lines.append(f"Time budget:          {plan['budget_seconds']:.1f} s: {plan['spent_seconds']:.1f} s of training "
                     f"({100 * plan['spent_share']:.1f} %), {plan['steps']} steps ({plan['epochs']:.2f} epochs; "
                     f"{plan['planned_steps']} planned first, {len(plan['plan'])} plannings"
                     + (", replayed)" if plan.get("replayed") else ")"))
    lines += memory_lines(summary)
    if txt_path:
        lines.append(f"Summary file:         {txt_path}")
    print("=" * 62, *lines, "=" * 62, sep="\n")


def overhead_lines(summary: dict) -> List[str]:
    """The report's lines on what training time held besides steps: compiles, selections by
    part, the probe's mode, and a hint when selections took much of it."""
    lines: List[str] = []
    train_seconds = summary["train_seconds"] or float("nan")
    overhead = [f"compiling steps {summary['compile_seconds']:.1f} s ({100 * summary['compile_share']:.1f} %)"]
    if summary["selection_seconds"]:
        seconds = summary["selection_seconds"]
        parts = summary.get("selection_parts", {})
        split = ", ".join(f"{name} {parts[part]:.2f} s" for part, name in
                          (("probe_trace", "the probe's first call"), ("probe_calls", "its gradient calls"),
                           ("probe", "its snapshots, update and copies"), ("anchor", "anchor"),
                           ("analysis", "contribution analysis"), ("dp", "DP"),
                           ("recalibrate", "recalibration")) if parts.get(part))
        overhead.append(f"selecting {sum(seconds):.1f} s ({100 * sum(seconds) / train_seconds:.1f} %, "
                        f"{len(seconds)} selections" + (f": {split})" if split else ")"))
        share = summary.get("overhead_share",  # summaries written before it was recorded
                            summary["compile_share"] + sum(seconds) / train_seconds)
        overhead.append(f"together {100 * share:.1f} %")
    lines.append(f"Inside that time:     {'; '.join(overhead)}")
    if summary.get("probe"):
        lines.append(f"Probe:                {summary['probe']['mode']} ({summary['probe']['why']})")
    if summary["selection_seconds"] and share > OVERHEAD_HINT_SHARE:
        lines.append(f"Hint:                 {len(summary['selection_seconds'])} selections took "
                     f"{100 * share:.0f} % of the training time; each new one probes and compiles a "
                     f"step, so a longer --interval (or a longer run) makes that share smaller")
    return lines


def memory_lines(summary: dict) -> List[str]:
    """The report's lines on memory: the budget, the allocator's peaks, the process's."""
    lines: List[str] = []
    if summary.get("memory_budget_mb"):
        lines.append(f"Memory budget:        {summary['memory_budget_mb']:g} MB; predicted step peak up to "
                     f"{summary['predicted_step_peak_mb']:.0f} MB, measured {summary['measured_step_peak_mb']:.0f} MB")
    peaks = [f"{name} {summary[key]:.0f} MB" for key, name in
             (("measured_step_peak_mb", "training steps"), ("measured_selection_peak_mb", "selections (probe, analysis)"),
              ("measured_evaluation_peak_mb", "evaluation")) if summary.get(key) is not None]
    if peaks:
        lines.append(f"Allocator peaks:      {', '.join(peaks)} (TensorFlow's tensors)")
    if "peak_memory_mb" in summary:
        lines.append(f"Peak memory:          {summary['peak_memory_mb']:.0f} MB resident (the whole process)")
    return lines
