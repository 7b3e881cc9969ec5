"""Memory as TensorFlow's allocator and the operating system count it: the allocator's statistics,
its peaks told apart by what the loop was doing (AllocatorPhases), the process's peak resident memory."""
from __future__ import annotations

import contextlib
import sys
from typing import Dict, List, Optional

import tensorflow as tf


MB = 2.0 ** 20


def allocator_device() -> str:
    """The device whose allocator holds a training step's tensors."""
    return "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0"


def allocator_mb(device: Optional[str] = None) -> Optional[Dict[str, float]]:
    """TensorFlow's allocator statistics (MB currently allocated and the peak since the last
    reset), or None where the allocator keeps none: on CPU only the BFC allocator does, which
    tf_environment.prepare_tensorflow_environment turns on (TF_CPU_ALLOCATOR_USE_BFC=true)."""
    try:
        info = tf.config.experimental.get_memory_info(device or allocator_device())
    except (ValueError, tf.errors.OpError):
        return None
    return {"current": info["current"] / MB, "peak": info["peak"] / MB}


def reset_peak(device: Optional[str] = None) -> None:
    """Start a new peak from what is allocated now (no-op where the allocator keeps no statistics)."""
    try:
        tf.config.experimental.reset_memory_stats(device or allocator_device())
    except (ValueError, tf.errors.OpError):
        pass


# What the allocator's peaks are told apart by: training steps, selections (probes, contribution
# analysis, the steps they compile), evaluation. Checkpoints, each epoch's input-pipeline start (its
# shuffle buffer filling, before its first batch) and the final reference timing count in none.
MEMORY_PHASES = ("step", "selection", "evaluation")


class AllocatorPhases:
    """The allocator's peaks of one run, told apart by phase (MEMORY_PHASES). The loop enters a
    phase around what is not a training step (`with phases.phase("evaluation")`); what ran since the
    last phase ended counts as "step" when a step ran (`stepped`). `peaks` (MB per phase, the run's)
    and `selections` (under a memory budget: each selection's predicted peak, and the measured one
    added here) are lists the loop checkpoints; `epoch_peaks` is the current epoch's."""

    def __init__(self, peaks: Dict[str, float], selections: List[Dict]):
        self.peaks, self.selections = peaks, selections
        self.epoch_peaks: Dict[str, float] = {}
        self.stepped = False  # whether a training step ran since the last phase ended

    def close(self, phase: Optional[str]) -> None:
        """Fold the allocator's peak since the last phase ended into `phase` (None: count it nowhere),
        and into the current selection's measured peak for training steps; then start a new peak.
        Nothing where the allocator keeps no statistics."""
        stats = allocator_mb()
        if stats is None:
            return
        if phase == "step" and not self.stepped:  # no step ran: what it reads is only what is held
            phase = None
        self.stepped = False
        if phase is not None:
            peak = stats["peak"]
            self.epoch_peaks[phase] = max(self.epoch_peaks.get(phase, 0.0), peak)
            self.peaks[phase] = max(self.peaks.get(phase, 0.0), peak)
            if phase == "step" and self.selections:
                latest = self.selections[-1]
                latest["measured_mb"] = max(latest.get("measured_mb", 0.0), peak)
        reset_peak()

    def predicted(self, step: int, info: Dict) -> None:
        """Under a memory budget, a new selection's predicted peak from the scheme's `info` (its
        steps' measured peak is added by `close`)."""
        if "memory/predicted_peak_mb" in info:
            self.selections.append({"step": step, "predicted_mb": info["memory/predicted_peak_mb"],
                                    "base_mb": info["memory/base_mb"],
                                    **({"probe_chunks": info["memory/probe_chunks"]}
                                       if "memory/probe_chunks" in info else {})})

    def run_peaks(self) -> Dict[str, Optional[float]]:
        """The run's peak (MB) in every phase, None in one the allocator saw no peak in."""
        return {phase: self.peaks.get(phase) for phase in MEMORY_PHASES}

    @contextlib.contextmanager
    def phase(self, name: Optional[str]):
        """The steps before it count as "step"; the block's own peak as `name` (None: nowhere)."""
        self.close("step")
        yield
        self.close(name)


def peak_memory_mb() -> float:
    """Peak resident memory of this process so far (MB; this session's, when resumed)."""
    import resource  # POSIX only
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux
