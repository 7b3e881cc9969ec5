"""Time the exact DP selector (selection_DP) on seeded, ResNet-like random instances.

Usage: python -m bench.solver [--repeats 30] [--seed 0] [--memory]
Prints one row per (N, resolution): median and minimum wall time of one solve. With --memory,
the selector under a time budget and a memory budget (select_within_budgets) instead, at memory
budgets of 100 %, 50 % and 25 % of the largest selection's memory (200 memory units).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import selection_solver_DP as solver

CASES = [(214, 1000), (500, 1000), (214, 10000), (500, 10000)]  # (tensors, resolution)
GOAL_MS = {(214, 1000): 5.0}


def resnet_like_instance(count: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Float ms times and importance in backward order, in conv/BN-gamma/BN-beta triples.

    Tensors of one layer share a point (t_dy = 0 between them); conv kernels dominate t_dw and
    the error propagation between layers dominates t_dy, as in profiled CNNs.
    """
    position = np.arange(count) % 3  # 0, 1: BN beta/gamma, 2: conv kernel (backward order)
    t_dw_ms = np.where(position == 2, rng.lognormal(0.0, 0.7, count),
                       rng.uniform(0.02, 0.1, count))
    t_dy_ms = np.where(position == 2, rng.lognormal(0.0, 0.7, count), 0.0)
    importance = np.abs(rng.normal(0.0, 1.0, count)) * rng.lognormal(0.0, 1.0, count)
    return t_dy_ms, t_dw_ms, importance


def time_case(count: int, resolution: int, repeats: int,
              rng: np.random.Generator) -> tuple[float, float]:
    """Median and minimum ms of selection_DP(rho=0.5) over fresh instances of one size."""
    durations = []
    for _ in range(repeats + 1):  # the first solve warms caches and is dropped
        t_dy_ms, t_dw_ms, importance = resnet_like_instance(count, rng)
        t_dy, t_dw, _ = solver.quantize_times(t_dy_ms, t_dw_ms, resolution)
        start = time.perf_counter()
        solver.selection_DP(t_dy, t_dw, importance, 0.5)
        durations.append((time.perf_counter() - start) * 1000.0)
    return float(np.median(durations[1:])), float(np.min(durations[1:]))


def time_two_budgets(count: int, share: float, repeats: int, rng: np.random.Generator) -> tuple[float, float]:
    """Median and minimum ms of select_within_budgets at half the backward time and `share` of
    the largest selection's memory (activations growing with depth, gradients per tensor)."""
    durations = []
    for _ in range(repeats + 1):
        t_dy_ms, t_dw_ms, importance = resnet_like_instance(count, rng)
        act_mb = np.cumsum(rng.uniform(0.5, 4.0, count))
        grad_mb = np.where(np.arange(count) % 3 == 2, rng.lognormal(0.0, 1.0, count), 0.01)
        budget_ms = 0.5 * float(t_dy_ms.sum() + t_dw_ms.sum())
        memory_mb = share * float(act_mb.max() + grad_mb.sum())
        start = time.perf_counter()
        solver.select_within_budgets(t_dy_ms, t_dw_ms, act_mb, grad_mb, importance, budget_ms, memory_mb)
        durations.append((time.perf_counter() - start) * 1000.0)
    return float(np.median(durations[1:])), float(np.min(durations[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="solves per case (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--memory", action="store_true", help="time the two-budget selector instead")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.memory:
        print("| N tensors | memory budget | median ms | min ms |")
        print("|---:|---:|---:|---:|")
        for count in (214, 500):
            for share in (1.0, 0.5, 0.25):
                median_ms, min_ms = time_two_budgets(count, share, args.repeats, rng)
                print(f"| {count} | {100 * share:.0f} % | {median_ms:.1f} | {min_ms:.1f} |")
        return
    print("| N tensors | resolution | median ms | min ms | goal |")
    print("|---:|---:|---:|---:|---|")
    for count, resolution in CASES:
        median_ms, min_ms = time_case(count, resolution, args.repeats, rng)
        goal = GOAL_MS.get((count, resolution))
        verdict = "-" if goal is None else (
            f"<= {goal:g} ms: {'met' if median_ms <= goal else 'NOT met'}")
        print(f"| {count} | {resolution} | {median_ms:.2f} | {min_ms:.2f} | {verdict} |")


if __name__ == "__main__":
    main()
