"""Exact tensor selector: maximise total importance under a backward-time budget.

Pure Python/NumPy (no TensorFlow). Arrays are in *backward* order (index 0 = the tensor nearest
the loss) unless a function says otherwise. With d the deepest selected index (docs/design.md §1):

    T_bp(M) = sum_k M[k] * t_dw[k] + sum_{j<d} t_dy[j]        (T_bp(empty) = 0)

CLI: ``python selection_solver_DP.py --profile profile_extracted/X.json --rho 0.5``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from typing import Mapping, Sequence, Union

import numpy as np

ArrayLike = Union[Sequence[float], np.ndarray]
# Refuse DP tables larger than this many cells (1 byte each) instead of exhausting memory.
_MAX_TABLE_CELLS = 2**28


class InfeasibleBudgetError(ValueError):
    """The backward budget implied by rho cannot pay for even the cheapest tensor."""


@dataclasses.dataclass(frozen=True)
class Selection:
    """A selection in *forward* order (model.trainable_weights order) and its predicted cost."""
    mask: np.ndarray  # uint8 0/1 per tensor, forward order
    importance: float  # total importance of the selected tensors
    budget_ms: float  # backward budget rho * T_full - T_fp
    backward_ms: float  # predicted T_bp(mask)
    step_ms: float  # predicted T_fp + T_bp(mask)
    rho_achieved: float  # step_ms / T_full


def _as_vector(values: ArrayLike, name: str, integer: bool = False) -> np.ndarray:
    """Validate a 1-D array of non-negative finite times (integers if `integer`)."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer)
                                   or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"{name} must hold real numbers, got dtype {array.dtype}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(array < 0):
        raise ValueError(f"{name} contains negative times (index {int(np.argmax(array < 0))})")
    if not integer:
        return array.astype(np.float64)
    if np.any(array != np.floor(array)):
        raise ValueError(f"{name} must hold integers (quantise float times with quantize_times)")
    if array.size and float(array.max()) >= 2.0**62:
        raise ValueError(f"{name} holds values too large for int64")
    return array.astype(np.int64)


def _as_importance(importance: ArrayLike, length: int) -> np.ndarray:
    array = np.asarray(importance, dtype=np.float64)
    if array.shape != (length,):
        raise ValueError(f"importance has shape {array.shape}, expected ({length},)")
    if not np.all(np.isfinite(array)):
        raise ValueError("importance contains NaN or infinite values")
    return array


def _as_times(t_dy: ArrayLike, t_dw: ArrayLike, integer: bool = False,
              suffix: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Validate both time arrays and their lengths."""
    t_dy = _as_vector(t_dy, "t_dy" + suffix, integer)
    t_dw = _as_vector(t_dw, "t_dw" + suffix, integer)
    if len(t_dy) != len(t_dw):
        raise ValueError(f"t_dy and t_dw have different lengths ({len(t_dy)} != {len(t_dw)})")
    return t_dy, t_dw


def backward_time(t_dy: ArrayLike, t_dw: ArrayLike, M: ArrayLike) -> float | int:
    """T_bp(M): selected weight-gradient times plus error propagation down to the deepest one.

    `t_dy`, `t_dw` (times) and `M` (0/1) are in backward order; the result is in the times' units,
    an int when both time arrays are integers.
    """
    t_dy, t_dw, selected = np.asarray(t_dy), np.asarray(t_dw), np.asarray(M).astype(bool)
    if not len(t_dy) == len(t_dw) == len(selected):
        raise ValueError("t_dy, t_dw and M must have the same length")
    if not selected.any():
        return 0
    deepest = int(np.flatnonzero(selected)[-1])
    return (t_dw[selected].sum() + t_dy[:deepest].sum()).item()


def _solve(t_dy: np.ndarray, t_dw: np.ndarray, importance: np.ndarray,
           budget: int) -> tuple[float, np.ndarray]:
    """Exact optimum for validated int64 times and an integer budget, in O(N * budget).

    Selecting d as the deepest index costs prefix_dy[d] + t_dw[d]; shallower tensors then cost only
    their t_dw. So the best selection with deepest index d is I[d] + K_d(budget - prefix_dy[d] -
    t_dw[d]), K_d a 0/1 knapsack over items 0..d-1 (weights t_dw, values I; items with I <= 0 left
    out), and the max over d (and 0 for the empty selection) is the exact optimum. K_{d+1}(c) =
    max(K_d(c), K_d(c - w_d) + I_d) is one vectorised max per item; a boolean "item taken" table
    rebuilds the chosen set.
    """
    count = len(t_dw)
    mask = np.zeros(count, dtype=np.uint8)
    if count == 0 or budget < 0:
        return 0.0, mask
    prefix_dy = np.concatenate(([0], np.cumsum(t_dy)[:-1]))  # prefix_dy[d] = sum_{j<d} t_dy[j]
    spare = budget - prefix_dy - t_dw  # knapsack capacity left when d is the deepest selected
    feasible = np.flatnonzero(spare >= 0)
    if feasible.size == 0:
        return 0.0, mask
    last = int(feasible[-1])  # no deeper tensor can be the deepest selected one
    useful_weight = int(t_dw[:last][importance[:last] > 0].sum())
    # Capacities beyond what any d can spare, or beyond all useful weight, never change K.
    capacity = int(max(0, min(int(spare[: last + 1].max()), useful_weight)))
    if last * (capacity + 1) > _MAX_TABLE_CELLS:
        raise ValueError(f"DP table of {last} x {capacity + 1} cells is too large; "
                         "quantise the times more coarsely")
    values = np.zeros(capacity + 1)  # values[c] = K_d(c), non-decreasing in c
    taken = np.zeros((last, capacity + 1), dtype=bool)
    scratch = np.empty(capacity + 1)
    # Python scalars: per-item numpy scalar indexing would dominate the run time.
    spare_list, weights, gains = spare.tolist(), t_dw.tolist(), importance.tolist()
    fixed_costs = (prefix_dy + t_dw).tolist()
    best_value, best_cost, best_deepest, best_capacity = 0.0, 0, -1, 0
    for deepest in range(last + 1):
        if spare_list[deepest] >= 0:
            room = min(spare_list[deepest], capacity)
            value = gains[deepest] + float(values[room])
            if value >= best_value:
                # K is non-decreasing, so the smallest capacity with the same value is the
                # cheapest knapsack achieving it: prefer the cheaper selection on ties.
                if room > 0 and values[room - 1] == values[room]:
                    room = int(values[: room + 1].searchsorted(values[room], side="left"))
                cost = fixed_costs[deepest] + room
                if value > best_value or cost < best_cost:
                    best_value, best_cost = value, cost
                    best_deepest, best_capacity = deepest, room
        weight, gain = weights[deepest], gains[deepest]
        if deepest == last or gain <= 0 or weight > capacity:
            continue
        if weight == 0:  # free and useful: always take it
            values += gain
            taken[deepest] = True
            continue
        with_item = np.add(values[:-weight], gain, out=scratch[weight:])  # K_d(c - w) + I_d
        np.greater(with_item, values[weight:], out=taken[deepest, weight:])
        np.maximum(values[weight:], with_item, out=values[weight:])
    if best_deepest < 0:
        return 0.0, mask
    mask[best_deepest] = 1
    room = best_capacity
    for item in range(best_deepest - 1, -1, -1):
        if taken[item, room]:
            mask[item] = 1
            room -= weights[item]
    return float(importance[mask == 1].sum()), mask


def predicted_peak(act: ArrayLike, grad: ArrayLike, M: ArrayLike) -> float | int:
    """Peak memory of selection M above the model's fixed part: the activations kept for the
    backward pass down to the deepest selected tensor d (act[d]) plus the selected tensors'
    gradients (sum of grad[M]); 0 for the empty selection."""
    act, grad, selected = np.asarray(act), np.asarray(grad), np.asarray(M).astype(bool)
    if not len(act) == len(grad) == len(selected):
        raise ValueError("act, grad and M must have the same length")
    if not selected.any():
        return 0
    return (act[int(np.flatnonzero(selected)[-1])] + grad[selected].sum()).item()


def _solve_two(t_dy: np.ndarray, t_dw: np.ndarray, act: np.ndarray, grad: np.ndarray, importance: np.ndarray,
               budget: int, memory: int) -> tuple[float, np.ndarray]:
    """Exact optimum under a time budget and a memory budget, integer units, in
    O(N * budget * memory): `_solve`'s decomposition by the deepest selected index d, with a
    two-capacity knapsack over the shallower tensors (weights t_dw and grad). Selecting d costs
    prefix_dy[d] + t_dw[d] of time and act[d] + grad[d] of memory up front."""
    count = len(t_dw)
    mask = np.zeros(count, dtype=np.uint8)
    if count == 0 or budget < 0 or memory < 0:
        return 0.0, mask
    prefix_dy = np.concatenate(([0], np.cumsum(t_dy)[:-1]))
    spare_time, spare_memory = budget - prefix_dy - t_dw, memory - act - grad
    feasible = np.flatnonzero((spare_time >= 0) & (spare_memory >= 0))
    if feasible.size == 0:
        return 0.0, mask
    last = int(feasible[-1])
    useful = importance[:last] > 0
    time_capacity = int(max(0, min(int(spare_time[feasible].max()), int(t_dw[:last][useful].sum()))))
    memory_capacity = int(max(0, min(int(spare_memory[feasible].max()), int(grad[:last][useful].sum()))))
    cells = (time_capacity + 1) * (memory_capacity + 1)
    if last * cells > _MAX_TABLE_CELLS:
        raise ValueError(f"DP table of {last} x {time_capacity + 1} x {memory_capacity + 1} cells is too large; "
                         "quantise times or memory more coarsely")
    values = np.zeros((time_capacity + 1, memory_capacity + 1))  # K_d(time, memory), non-decreasing in both
    taken = np.zeros((last, time_capacity + 1, memory_capacity + 1), dtype=bool)
    best_value, best_deepest, best_room = 0.0, -1, (0, 0)
    for deepest in range(last + 1):
        if spare_time[deepest] >= 0 and spare_memory[deepest] >= 0:
            room = (min(int(spare_time[deepest]), time_capacity), min(int(spare_memory[deepest]), memory_capacity))
            value = float(importance[deepest]) + float(values[room])
            if value > best_value:
                best_value, best_deepest, best_room = value, deepest, room
        weight, size, gain = int(t_dw[deepest]), int(grad[deepest]), float(importance[deepest])
        if deepest == last or gain <= 0 or weight > time_capacity or size > memory_capacity:
            continue
        if weight == 0 and size == 0:  # free and useful: always take it
            values += gain
            taken[deepest] = True
            continue
        with_item = values[:time_capacity + 1 - weight, :memory_capacity + 1 - size] + gain  # a copy
        target = values[weight:, size:]
        np.greater(with_item, target, out=taken[deepest, weight:, size:])
        np.maximum(target, with_item, out=target)
    if best_deepest < 0:
        return 0.0, mask
    mask[best_deepest] = 1
    time_room, memory_room = best_room
    for item in range(best_deepest - 1, -1, -1):
        if taken[item, time_room, memory_room]:
            mask[item] = 1
            time_room -= int(t_dw[item])
            memory_room -= int(grad[item])
    return float(importance[mask == 1].sum()), mask


def select_within_budgets(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, act_mb: ArrayLike, grad_mb: ArrayLike,
                          I: ArrayLike, budget_ms: float, memory_mb: float, resolution: int = 1000,
                          memory_resolution: int = 200) -> tuple[float, np.ndarray]:
    """Best selection whose backward time fits budget_ms and whose memory above the fixed part
    (predicted_peak) fits memory_mb: exact on the quantised problem, never over either budget in real
    units (times and sizes rounded up, budgets down).

    Args:
        t_dy_ms, t_dw_ms, I: times in ms and importance, backward order.
        act_mb: activation memory kept when each tensor is the deepest selected, backward order.
        grad_mb: each tensor's gradient, backward order (optimizer slots exist for every tensor
            from the start, so they belong to the fixed part).
        budget_ms, memory_mb: the two budgets (>= 0).
        resolution, memory_resolution: quantisation units for the total time and the largest peak.
    Returns:
        (max_importance, M).
    """
    t_dy_q, t_dw_q, units_per_ms = quantize_times(t_dy_ms, t_dw_ms, resolution)
    act, grad = _as_vector(act_mb, "act_mb"), _as_vector(grad_mb, "grad_mb")
    if not len(act) == len(grad) == len(t_dw_q):
        raise ValueError("act_mb and grad_mb need one value per tensor")
    importance = _as_importance(I, len(t_dw_q))
    for name, value in (("budget_ms", budget_ms), ("memory_mb", memory_mb)):
        if not (isinstance(value, (int, float, np.number)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    largest = float(act.max() + grad.sum()) if len(act) else 0.0
    units_per_mb = memory_resolution / largest if largest > 0 else float(memory_resolution)
    act_q, grad_q = np.ceil(act * units_per_mb).astype(np.int64), np.ceil(grad * units_per_mb).astype(np.int64)
    memory = math.floor(memory_mb * units_per_mb * (1.0 - 1e-9))
    return _solve_two(t_dy_q, t_dw_q, act_q, grad_q, importance, _budget_units(budget_ms, units_per_ms, t_dy_q, t_dw_q),
                      memory)


def selection_DP(t_dy: ArrayLike, t_dw: ArrayLike, I: ArrayLike,
                 rho: float) -> tuple[float, np.ndarray]:
    """Maximise sum(I[M]) subject to T_bp(M) <= floor(rho * sum(t_dw + t_dy)) (docs/design.md §2).

    `t_dy`, `t_dw`: non-negative integer (quantised) times and `I` importance, backward order; `rho`
    in [0, 1]. Returns (max_importance, M), M a uint8 0/1 array; the empty selection scores 0.0.
    """
    t_dy, t_dw = _as_times(t_dy, t_dw, integer=True)
    importance = _as_importance(I, len(t_dw))
    if not (isinstance(rho, (int, float, np.number)) and 0.0 <= float(rho) <= 1.0):
        raise ValueError(f"rho must be a number in [0, 1], got {rho!r}")
    budget = math.floor(float(rho) * int(t_dy.sum() + t_dw.sum()))
    return _solve(t_dy, t_dw, importance, budget)


def quantize_times(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike,
                   resolution: int = 1000) -> tuple[np.ndarray, np.ndarray, float]:
    """Scale float ms (backward order) to int64 units, rounding up so no time is under-counted:
    (t_dy_q, t_dw_q, units_per_ms), t_q = ceil(t_ms * units_per_ms), with the total time mapped to
    `resolution` units."""
    t_dy, t_dw = _as_times(t_dy_ms, t_dw_ms, suffix="_ms")
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)) \
            or resolution < 1:
        raise ValueError(f"resolution must be a positive integer, got {resolution!r}")
    total_ms = float(t_dy.sum() + t_dw.sum())
    # All-zero times quantise to zeros at any scale; pretend the total is 1 ms.
    units_per_ms = resolution / total_ms if total_ms > 0 else float(resolution)
    return (np.ceil(t_dy * units_per_ms).astype(np.int64),
            np.ceil(t_dw * units_per_ms).astype(np.int64), units_per_ms)


def select_within_budget(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, I: ArrayLike,
                         budget_ms: float, resolution: int = 1000) -> tuple[float, np.ndarray]:
    """Best selection M whose float backward time fits budget_ms (>= 0), exact on quantised times
    (`resolution`, see quantize_times): (max_importance, M), backward order like the times and I,
    with backward_time(t_dy_ms, t_dw_ms, M) <= budget_ms."""
    t_dy_q, t_dw_q, units_per_ms = quantize_times(t_dy_ms, t_dw_ms, resolution)
    importance = _as_importance(I, len(t_dw_q))
    if not (isinstance(budget_ms, (int, float, np.number)) and math.isfinite(budget_ms)
            and budget_ms >= 0):
        raise ValueError(f"budget_ms must be a finite number >= 0, got {budget_ms!r}")
    return _solve(t_dy_q, t_dw_q, importance, _budget_units(budget_ms, units_per_ms, t_dy_q, t_dw_q))


def _budget_units(budget_ms: float, units_per_ms: float, t_dy_q: np.ndarray, t_dw_q: np.ndarray) -> int:
    """A backward budget in the quantised time units, rounded down. Ceil on times and floor on the
    budget make quantised feasibility imply real feasibility; the 1e-9 margin absorbs float
    rounding in the products (and later float sums)."""
    total_units = int(t_dy_q.sum() + t_dw_q.sum())
    scaled = budget_ms * units_per_ms * (1.0 - 1e-9)
    return total_units if scaled >= total_units else math.floor(scaled)


def backward_budget_ms(rho: float, T_fp_ms: float, T_full_ms: float) -> float:
    """Backward budget rho * T_full - T_fp in ms (negative when rho * T_full is below the forward
    time), for rho in (0, 1] and measured times with 0 <= T_fp < T_full (ValueError otherwise)."""
    if not (isinstance(rho, (int, float, np.number)) and 0.0 < float(rho) <= 1.0):
        raise ValueError(f"rho must be a number in (0, 1], got {rho!r}")
    if not (math.isfinite(T_fp_ms) and math.isfinite(T_full_ms) and 0 <= T_fp_ms < T_full_ms):
        raise ValueError(f"need finite times with 0 <= T_fp_ms < T_full_ms, got "
                         f"T_fp_ms={T_fp_ms!r}, T_full_ms={T_full_ms!r}")
    return float(rho) * T_full_ms - T_fp_ms


def _cheapest_ms(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike) -> float:
    """Cost of the cheapest non-empty selection: min_k prefix_dy[k] + t_dw[k]."""
    t_dy, t_dw = _as_times(t_dy_ms, t_dw_ms, suffix="_ms")
    if len(t_dw) == 0:
        raise ValueError("the profile has no tensors")
    prefix_dy = np.concatenate(([0.0], np.cumsum(t_dy)[:-1]))
    return float(np.min(prefix_dy + t_dw))


def smallest_feasible_rho(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, T_fp_ms: float,
                          T_full_ms: float) -> float:
    """Smallest rho whose budget pays for the cheapest single tensor, (T_fp + cheapest) / T_full
    (times in ms, backward order, at least one tensor); above 1 when no rho is feasible."""
    backward_budget_ms(1.0, T_fp_ms, T_full_ms)  # validates the two times
    return (T_fp_ms + _cheapest_ms(t_dy_ms, t_dw_ms)) / T_full_ms


RHO_MODES = ("exact", "paper")
PAPER_UNITS = 1000  # the original quantises the backward pass to this many units (its Tq)


def paper_backward_fraction(rho: float) -> float:
    """The original's rho -> backward fraction, (rho - 1/3) * 3/2: its 2:1 FLOPs rule takes the
    forward pass as a third of a step, so rho leaves (rho - 1/3) of the step for the backward pass."""
    return (float(rho) - 1.0 / 3.0) * 1.5


def paper_quantize(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike,
                   units: int = PAPER_UNITS) -> tuple[np.ndarray, np.ndarray, float]:
    """The original's downscaling: each time floored to 1/units of the total backward time.
    Returns (t_dy_q, t_dw_q, disco): int64 units (tensors under 1/units cost 0, as there) and disco,
    the share of the units left after flooring."""
    t_dy, t_dw = _as_times(t_dy_ms, t_dw_ms, suffix="_ms")
    total = float(t_dy.sum() + t_dw.sum())
    scale = units / total if total > 0 else 0.0
    t_dy_q, t_dw_q = np.floor(t_dy * scale).astype(np.int64), np.floor(t_dw * scale).astype(np.int64)
    disco = float(t_dy_q.sum() + t_dw_q.sum()) / units if total > 0 else 1.0
    return t_dy_q, t_dw_q, disco


def paper_disco(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, units: int = PAPER_UNITS) -> float:
    """The original's `disco`: the share of the backward time left after flooring each tensor's
    time to 1/units of the total (it scales the backward fraction down by this, slightly)."""
    return paper_quantize(t_dy_ms, t_dw_ms, units)[2]


def paper_problem(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, rho: float) -> tuple[np.ndarray, np.ndarray, int]:
    """The selection problem as the original poses it for a rho: (t_dy_q, t_dw_q, budget_units),
    floored times and the budget int(rho_b * disco * sum(floored)), rho_b = (rho - 1/3) * 3/2;
    negative when rho <= 1/3."""
    t_dy_q, t_dw_q, disco = paper_quantize(t_dy_ms, t_dw_ms)
    fraction = paper_backward_fraction(rho) * disco
    return t_dy_q, t_dw_q, math.floor(fraction * int(t_dy_q.sum() + t_dw_q.sum()))


def select_paper(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, I: ArrayLike, rho: float) -> tuple[float, np.ndarray]:
    """The most important selection under the original's budget for rho (its floored times and
    budget; solved exactly, where the original's DP is sometimes suboptimal). Backward order."""
    t_dy_q, t_dw_q, budget = paper_problem(t_dy_ms, t_dw_ms, rho)
    return _solve(t_dy_q, t_dw_q, _as_importance(I, len(t_dw_q)), budget)


def budget_for_rho(rho: float, t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, T_fp_ms: float,
                   T_full_ms: float, rho_mode: str = "exact") -> float:
    """Backward budget (ms) for a user's rho.

    exact: rho * T_full - T_fp from measured times (the original's README, FAQ Q5).
    paper: what the original's code runs, (rho - 1/3) * 3/2 * disco of the total backward time
        sum(t_dw + t_dy) (its 2:1 FLOPs rule, whatever the forward pass really costs).
    """
    budget_ms = backward_budget_ms(rho, T_fp_ms, T_full_ms)  # validates rho and both times
    if rho_mode == "exact":
        return budget_ms
    if rho_mode != "paper":
        raise ValueError(f"rho_mode must be one of {RHO_MODES}, got {rho_mode!r}")
    t_dy, t_dw = _as_times(t_dy_ms, t_dw_ms, suffix="_ms")
    return paper_backward_fraction(rho) * paper_disco(t_dy, t_dw) * float(t_dy.sum() + t_dw.sum())


def check_feasible(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, rho: float, T_fp_ms: float,
                   T_full_ms: float, rho_mode: str = "exact") -> float:
    """Backward budget for rho (budget_for_rho; arguments as there, times in ms, backward order),
    which pays for at least one tensor; InfeasibleBudgetError naming the smallest feasible rho."""
    budget_ms = budget_for_rho(rho, t_dy_ms, t_dw_ms, T_fp_ms, T_full_ms, rho_mode)
    if rho_mode == "paper":  # in the original's floored units, where tiny tensors cost nothing
        t_dy_q, t_dw_q, budget_units = paper_problem(t_dy_ms, t_dw_ms, rho)
        cheapest_units = _cheapest_ms(t_dy_q, t_dw_q)
        feasible = budget_units >= cheapest_units
        disco_total = float(t_dy_q.sum() + t_dw_q.sum())
        smallest = 1.0 / 3.0 + cheapest_units / max(disco_total, 1e-12) / 1.5
        spent = f"{budget_units} of the original's {int(disco_total)} floored time units"
    else:
        cheapest_ms = _cheapest_ms(t_dy_ms, t_dw_ms)
        feasible = budget_ms >= cheapest_ms
        smallest = (T_fp_ms + cheapest_ms) / T_full_ms
        spent = f"a backward budget of {budget_ms:.4g} ms"
    if not feasible:
        hint = (f"the smallest feasible rho for this profile is {smallest:.4g}" if smallest <= 1
                else f"no rho <= 1 is feasible (it would take rho={smallest:.4g})")
        raise InfeasibleBudgetError(
            f"rho={rho:.4g} ({rho_mode} mode) leaves {spent}, which cannot pay for even the "
            f"cheapest tensor; {hint}")
    return budget_ms


def top_within_budget(t_dy_ms: ArrayLike, t_dw_ms: ArrayLike, budget_ms: float) -> np.ndarray:
    """The longest contiguous top (backward order 0..k-1, costing sum(t_dw[:k]) + sum(t_dy[:k-1]))
    whose backward time fits budget_ms, as a uint8 mask in backward order (the static-top baseline)."""
    t_dy, t_dw = _as_times(t_dy_ms, t_dw_ms, suffix="_ms")
    costs = np.cumsum(t_dw) + np.concatenate(([0.0], np.cumsum(t_dy)[:-1]))
    count = int(np.searchsorted(costs, budget_ms * (1.0 + 1e-12), side="right"))
    mask = np.zeros(len(t_dw), np.uint8)
    mask[:count] = 1
    return mask


def select_window(t_dy: ArrayLike, t_dw: ArrayLike, I: ArrayLike, block_of: ArrayLike, required: ArrayLike,
                  fill: ArrayLike, budget: int) -> tuple[float, np.ndarray]:
    """The most important *window* selection within an integer budget (backward order throughout).

    A window selection trains the `required` tensors, every tensor of one contiguous range of at least
    one block (`block_of`: each tensor's block, counted from the input; -1 for none), and any `fill`
    tensors above the range's deepest tensor, which cost only their t_dw there. For each range that
    fits, the fill is the exact knapsack on what the range leaves; the best total importance wins, of
    equal ones the cheaper.

    Args:
        t_dy, t_dw: non-negative integer (quantised) times; I: importance per tensor.
        block_of: int per tensor; required, fill: 0/1 per tensor.
        budget: the backward budget in the same units.
    Returns:
        (total importance, uint8 mask); (-inf, zeros) when no range fits.
    """
    t_dy, t_dw = _as_times(t_dy, t_dw, integer=True)
    count = len(t_dw)
    importance = _as_importance(I, count)
    block_of = np.asarray(block_of, dtype=np.int64)
    required, fill = np.asarray(required).astype(bool), np.asarray(fill).astype(bool)
    if not block_of.shape == required.shape == fill.shape == (count,):
        raise ValueError(f"block_of, required and fill must each hold one value per tensor ({count})")
    best_value, best_cost, best = -math.inf, math.inf, np.zeros(count, np.uint8)
    for first in range(int(block_of.max(initial=-1)) + 1):
        for stop in range(first + 1, int(block_of.max()) + 2):
            window = required | ((block_of >= first) & (block_of < stop))
            cost = backward_time(t_dy, t_dw, window)
            if cost > budget:  # a later STOP adds weight gradients above the same deepest tensor
                break
            mask = window.astype(np.uint8)
            deepest = int(np.flatnonzero(window)[-1])
            above = np.flatnonzero(fill & ~window & (np.arange(count) < deepest))
            if above.size and budget > cost:
                _, chosen = _solve(np.zeros(above.size, np.int64), t_dw[above], importance[above], int(budget - cost))
                mask[above[chosen == 1]] = 1
            value, total = float(importance[mask == 1].sum()), backward_time(t_dy, t_dw, mask)
            if value > best_value or (value == best_value and total < best_cost):
                best_value, best_cost, best = value, total, mask
    return best_value, best


def _profile_times(profile: Mapping) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(t_dy_ms, t_dw_ms) in backward order plus T_fp_ms and T_full_ms from a profile dict."""
    for key in ("T_fp_ms", "T_full_ms", "tensors"):
        if key not in profile:
            raise ValueError(f"profile is missing the key {key!r}")
    tensors = profile["tensors"]
    if not isinstance(tensors, list) or not tensors:
        raise ValueError("profile 'tensors' must be a non-empty list")
    try:  # the list is in forward order; each entry's t_dy_ms leads towards the input
        t_dy = [float(tensor["t_dy_ms"]) for tensor in reversed(tensors)]
        t_dw = [float(tensor["t_dw_ms"]) for tensor in reversed(tensors)]
        T_fp_ms, T_full_ms = float(profile["T_fp_ms"]), float(profile["T_full_ms"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"profile has a missing or non-numeric time: {error!r}") from None
    return (*_as_times(t_dy, t_dw, suffix="_ms"), T_fp_ms, T_full_ms)


def select_for_rho(profile: Mapping, importance: ArrayLike, rho: float,
                   resolution: int = 1000, rho_mode: str = "exact") -> Selection:
    """Select tensors for a training loop: forward-order importance in, forward-order mask out.

    Args:
        profile: timing table as in docs/design.md §3 (T_fp_ms, T_full_ms, tensors in forward order).
        importance: one value per tensor, forward (model.trainable_weights) order.
        rho, rho_mode: step time as a fraction of T_full, in (0, 1]; "exact" or "paper" (budget_for_rho).
        resolution: quantisation units for the total backward time.
    Returns:
        The Selection; raises InfeasibleBudgetError when rho is below the smallest feasible rho.
    """
    t_dy, t_dw, T_fp_ms, T_full_ms = _profile_times(profile)
    backward_importance = _as_importance(importance, len(t_dw))[::-1]
    budget_ms = check_feasible(t_dy, t_dw, rho, T_fp_ms, T_full_ms, rho_mode)
    if rho_mode == "paper":
        value, mask = select_paper(t_dy, t_dw, backward_importance, rho)
    else:
        value, mask = select_within_budget(t_dy, t_dw, backward_importance, budget_ms, resolution)
    backward_ms = float(backward_time(t_dy, t_dw, mask))
    return Selection(mask=mask[::-1].copy(), importance=value, budget_ms=budget_ms,
                     backward_ms=backward_ms, step_ms=T_fp_ms + backward_ms,
                     rho_achieved=(T_fp_ms + backward_ms) / T_full_ms)


def _load_importance(path: str) -> np.ndarray:
    if path.endswith(".json"):
        with open(path) as handle:
            return np.asarray(json.load(handle), dtype=np.float64)
    if path.endswith(".npy"):
        return np.load(path).astype(np.float64)
    return np.loadtxt(path, dtype=np.float64, ndmin=1)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: print the tensors selected for a profile and a rho."""
    parser = argparse.ArgumentParser(
        description="Pick the tensors to train for a step-time target rho (exact DP).")
    parser.add_argument("--profile", required=True,
                        help="timing table JSON from profiler.py (profile_extracted/<...>.json)")
    parser.add_argument("--rho", type=float, required=True,
                        help="wanted step time as a fraction of the full training step, (0, 1]")
    parser.add_argument("--rho_mode", default="exact", choices=RHO_MODES,
                        help="exact: backward budget rho*T_full - T_fp from measured times; paper: "
                             "the original's (rho - 1/3)*3/2 of the backward time (2:1 FLOPs rule)")
    parser.add_argument("--importance", default=None,
                        help="importance per tensor in forward (model.trainable_weights) order: "
                             ".json list of floats, .npy array, or text with one value a line; "
                             "default 1.0 for every tensor")
    parser.add_argument("--resolution", type=int, default=1000,
                        help="integer time units the total backward time is quantised to "
                             "(higher: finer, slower; default 1000)")
    args = parser.parse_args(argv)
    try:
        with open(args.profile) as handle:
            profile = json.load(handle)
        if not isinstance(profile, dict):
            raise ValueError("the profile JSON must be an object")
        tensors = profile.get("tensors")
        count = len(tensors) if isinstance(tensors, list) else 0
        importance = (np.ones(count) if args.importance is None
                      else _load_importance(args.importance))
        selection = select_for_rho(profile, importance, args.rho, args.resolution, args.rho_mode)
        names = [str(tensor.get("name", f"tensor_{index}"))
                 for index, tensor in enumerate(profile["tensors"])]
    except (OSError, TypeError, ValueError) as error:
        parser.error(str(error))
    T_full_ms = float(profile["T_full_ms"])
    print(f"Selected {int(selection.mask.sum())} / {count} tensors "
          f"(total importance {selection.importance:.6g}):")
    for name, chosen in zip(names, selection.mask):
        if chosen:
            print(f"  {name}")
    print(f"Predicted step time: {selection.step_ms:.2f} ms "
          f"(T_fp {float(profile['T_fp_ms']):.2f} + T_bp {selection.backward_ms:.2f}; "
          f"backward budget {selection.budget_ms:.2f})")
    print(f"Target step time: rho * T_full = {args.rho * T_full_ms:.2f} ms "
          f"(T_full {T_full_ms:.2f} ms)")
    print(f"Predicted speedup: rho_achieved = {selection.rho_achieved:.4f} (rho = {args.rho})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
