"""Timing steps where they run: wall times of interleaved calls, their typical value and spread,
and a selection's step timed against a full one (the summary's reference timing)."""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from elastic_trainer.run_summary import mixed_reference
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


def reference_timing(steps: "StepCache", optimizer, step_mix: Sequence[Tuple[np.ndarray, float]], batch,
                     count: int) -> Dict[str, float]:
    """The final selection timed against full steps now (measure_reference, `count` steps each), for
    a scheme whose steps mix several masks each mask by its share (`step_mix`); {} when `count` is
    0 or every step trains everything."""
    mix = [(mask, share) for mask, share in step_mix if share > 0]
    if not count or all(mask.all() for mask, _ in mix):
        return {}
    return mixed_reference([(measure_reference(steps, optimizer, mask, batch, count), share) for mask, share in mix])
