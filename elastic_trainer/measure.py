"""Measuring a step where it runs: wall times of interleaved calls, their typical value and
spread, a selection timed against a full step, and the allocator's memory statistics, told apart
by what the loop was doing (AllocatorPhases)."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from train_step import StepCache, preserved_state


def wall_time_samples(functions: Sequence[Callable[[], object]], steps: int, block: int = 5) -> List[List[float]]:
    """Wall times (ms) of `steps` calls of each function.

    Calls run in blocks of consecutive calls per function, as training runs one selection for
    many steps; blocks of different functions alternate (A A A B B B A A A ...) so that slow
    phases of a shared machine hit them all alike.
    """
    samples: List[List[float]] = [[] for _ in functions]
    while len(samples[0]) < steps:
        for index, function in enumerate(functions):
            for _ in range(min(block, steps - len(samples[index]))):
                start = time.perf_counter()
                function()
                samples[index].append((time.perf_counter() - start) * 1000.0)
    return samples


def typical_ms(samples: Sequence[float]) -> float:
    """The typical step time of a set of samples: their 25th percentile.

    On a shared machine other work only ever adds time, in bursts that can cover half of a
    measurement; a low quantile tracks the machine's own speed where a median would not.
    """
    return float(np.percentile(samples, 25))


def round_medians(rounds: Sequence[Sequence[float]]) -> Tuple[List[float], List[float]]:
    """Typical times of functions measured in several rounds (one list of times per round).

    Returns, per function, the median of its rounds and their spread (largest minus smallest
    round over that median): on a shared machine one round can be all slow, and the spread is
    the measurement's own noise.
    """
    table = np.asarray(rounds, float)
    median = np.median(table, axis=0)
    return median.tolist(), (np.ptp(table, axis=0) / median).tolist()


def wall_times_ms(functions: Sequence[Callable[[], object]], steps: int, block: int = 5) -> List[float]:
    """Typical wall time (ms) of each function over `steps` block-interleaved calls."""
    return [typical_ms(s) for s in wall_time_samples(functions, steps, block)]


MB = 2.0 ** 20


def allocator_device() -> str:
    """The device whose allocator holds a training step's tensors."""
    return "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0"


def allocator_mb(device: Optional[str] = None) -> Optional[Dict[str, float]]:
    """TensorFlow's allocator statistics (MB currently allocated and the peak since the last
    reset), or None where the allocator keeps none: on CPU only the BFC allocator does, which
    utils.prepare_tensorflow_environment turns on (TF_CPU_ALLOCATOR_USE_BFC=true)."""
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


def measure_reference(steps: "StepCache", optimizer, mask: np.ndarray, batch, count: int) -> Dict[str, float]:
    """Time full-training steps against steps of `mask` now, in this process, interleaved in
    blocks (model and optimizer state restored), so the run's step times are compared with a
    full step under the same conditions rather than only with the (older) profile."""
    images, labels = batch
    start = time.perf_counter()
    full, current = steps.get(np.ones_like(mask)), steps.get(mask)
    with preserved_state(steps.model, optimizer):
        for step in (full, current, full, current):  # compile (if new) and warm up
            step(images, labels)[0].numpy()
        full_ms, mask_ms = wall_time_samples(
            [lambda s=s: s(images, labels)[0].numpy() for s in (full, current)], count)
    return {"reference_full_step_ms": float(np.median(full_ms)),
            "reference_selection_step_ms": float(np.median(mask_ms)),
            "reference_seconds": time.perf_counter() - start}


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
