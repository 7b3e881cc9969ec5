"""How steady are fresh profiles? Each one's full step and gradient pass against the same two
timed in pairs right after, in the profiling process.

    python -m bench.profile_consistency [--profiles 6] [--pairs 20] [--output FILE]

Each profile is made in a process of its own, as a user makes one (`profiler.profile_model` on
the study protocol's MobileNetV2: 64 px, batch 32, frozen BatchNorm, the cached source backbone
when present; no profile file is written). Right after, in that process, the full step and the
probe's full-gradient pass are timed in alternation, one call each, `--pairs` times: that is
the machine's speed of the moment and the steps' own ratio, which the profile should match.

Per profile it prints the profile's T_full and T_grad (exact mode's target is rho x T_full, and
from the second selection on rho x T_full / T_grad x the probe's gradient pass now), their
ratio, the paired timing's, and the full step timed after over T_full. The summary gives the
spread of both ratios across profiles and how many profiles' T_full the full step timed after
fell within 0.95-1.05 of. A benchmark: it prints, it asserts nothing; run it alone.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, List

from bench import publish_report
from elastic_trainer.command_line import UserError, positive_int
from experiments import study_plans

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MARK = "PROFILE_RESULT "  # the child's result line


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--profiles", type=positive_int, default=6, help="fresh profiles, one process each")
    parser.add_argument("--pairs", type=positive_int, default=20,
                        help="full steps and gradient passes timed in alternation after each profile")
    parser.add_argument("--output", help="also write the report (markdown) to this file")
    parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)  # a child: one profile
    return parser.parse_args(argv)


def profile_once(pairs: int) -> Dict[str, float]:
    """One fresh profile, then the full step and the gradient pass timed in pairs (this process)."""
    import profiler
    from elastic_trainer.step_timing import typical_ms, wall_time_samples
    from train_step import TrainStep, full_gradients, make_optimizer, shared_forward

    model, protocol = study_plans.protocol_model("mobilenetv2")
    profile = profiler.profile_model(model, protocol["batch_size"], meta={})
    snapshot = model.get_weights()
    forward = shared_forward(model)
    full = TrainStep(model, make_optimizer("sgd", 1e-4, 5e-4, 1000).optimizer, model.trainable_weights, forward=forward)
    gradients = full_gradients(model, forward)
    images, labels = profiler.random_batch(model, protocol["batch_size"])
    calls = [lambda: full(images, labels)[0].numpy(), lambda: gradients(images, labels)[0].numpy()]
    for call in calls * 2:  # compile and warm up
        call()
    full_ms, gradients_ms = wall_time_samples(calls, pairs, block=1)
    model.set_weights(snapshot)
    return {"T_full_ms": float(profile["T_full_ms"]), "T_grad_ms": float(profile["T_grad_ms"]),
            "after_full_ms": typical_ms(full_ms), "after_grad_ms": typical_ms(gradients_ms),
            "after_ratio": paired_ratio(full_ms, gradients_ms)}


def paired_ratio(numerators: List[float], denominators: List[float]) -> float:
    """The median ratio of calls timed in pairs, one right after the other: other load on a
    shared machine spans both calls of a pair alike and cancels out of it."""
    if not numerators or len(numerators) != len(denominators):
        raise ValueError(f"need as many timed calls on each side, got {len(numerators)} and {len(denominators)}")
    return statistics.median(n / d for n, d in zip(numerators, denominators))


def report(rows: List[Dict[str, float]], pairs: int) -> str:
    lines = [f"{len(rows)} fresh profiles of the study's MobileNetV2, each followed by {pairs} paired calls", "",
             "| profile | T_full / T_grad ms | ratio | after: full / grad ms | paired ratio | after full / T_full |",
             "|---:|---|---:|---|---:|---:|"]
    for index, row in enumerate(rows, 1):
        lines.append(f"| {index} | {row['T_full_ms']:.1f} / {row['T_grad_ms']:.1f} | {row['T_full_ms'] / row['T_grad_ms']:.3f} "
                     f"| {row['after_full_ms']:.1f} / {row['after_grad_ms']:.1f} | {row['after_ratio']:.3f} "
                     f"| {row['after_full_ms'] / row['T_full_ms']:.3f} |")
    columns = [[row["T_full_ms"] / row["T_grad_ms"] for row in rows], [row["after_ratio"] for row in rows]]
    lines += ["", "| | profile's T_full / T_grad | paired after |", "|---|---:|---:|",
              "| mean ratio | " + " | ".join(f"{statistics.fmean(c):.3f}" for c in columns) + " |",
              "| standard deviation | " + " | ".join(f"{statistics.pstdev(c):.3f}" for c in columns) + " |"]
    within = sum(0.95 <= row["after_full_ms"] / row["T_full_ms"] <= 1.05 for row in rows)
    agree = sum(abs(row["T_full_ms"] / row["T_grad_ms"] / row["after_ratio"] - 1) <= 0.08 for row in rows)
    lines += ["", f"full step timed after within 0.95-1.05 of the profile's T_full in {within} of {len(rows)}; "
                  f"T_full / T_grad within 8 % of the pairs after in {agree} of {len(rows)}"]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.single:
        print(MARK + json.dumps(profile_once(args.pairs)), flush=True)
        return 0
    rows = []
    for index in range(args.profiles):
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--single", "--pairs", str(args.pairs)],
                               capture_output=True, text=True, cwd=ROOT)
        found = [line for line in child.stdout.splitlines() if line.startswith(MARK)]
        if child.returncode or not found:
            raise UserError(f"profile {index + 1} failed (exit {child.returncode}): "
                            f"{(child.stderr.strip().splitlines() or ['no output'])[-1]}")
        rows.append(json.loads(found[-1][len(MARK):]))
        print(f"profile {index + 1} of {args.profiles}: T_full {rows[-1]['T_full_ms']:.1f} ms, "
              f"full step after {rows[-1]['after_full_ms']:.1f} ms", flush=True)
    publish_report(report(rows, args.pairs), args.output)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as error:
        sys.exit(f"error: {error}")
