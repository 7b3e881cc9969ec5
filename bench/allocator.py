"""Does TensorFlow's BFC allocator on CPU (which keeps the memory statistics the memory model and
--memory_budget_mb read; tf_environment turns it on) change training-step times or resident memory?

    python -m bench.allocator [--model_name mobilenetv2] [--input_size 128] [--batch_size 32] [--rounds 2]

Runs, alternately, a fresh process with TF_CPU_ALLOCATOR_USE_BFC=false (TensorFlow's default CPU
allocator) and one with =true, `--rounds` times each; every process times a full step and a step
of the top 60 tensors in 3 alternating blocks of 15 steps (25th percentiles) and reports its peak
resident memory. Prints one line per process and the ratio of the medians, BFC over default.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(model_name: str, input_size: int, batch_size: int) -> Dict[str, float]:
    """Step times (ms) and peak RSS (MB) of this process, with whatever allocator it started with."""
    from elastic_trainer import tf_environment  # noqa: F401  (first: TensorFlow's environment; keeps a set allocator choice)
    import resource
    import time

    import numpy as np

    import models
    from profiler import random_batch
    from train_step import TrainStep, make_optimizer, shared_forward

    model = models.build_model(model_name, 64, input_size, "none", "frozen")
    setup = make_optimizer("sgd", 1e-4, 5e-4, 1000)
    setup.optimizer._create_all_weights(model.trainable_weights)
    forward = shared_forward(model)
    images, labels = random_batch(model, batch_size, 0)
    steps = {"full": TrainStep(model, setup.optimizer, model.trainable_weights, forward=forward),
             "top60": TrainStep(model, setup.optimizer, model.trainable_weights[-60:], forward=forward)}
    for step in steps.values():
        for _ in range(3):
            step(images, labels)[0].numpy()
    samples: Dict[str, List[float]] = {name: [] for name in steps}
    for _ in range(3):
        for name, step in steps.items():
            times = []
            for _ in range(15):
                start = time.perf_counter()
                step(images, labels)[0].numpy()
                times.append(time.perf_counter() - start)
            samples[name].append(float(np.percentile(times, 25)) * 1000)
    return {**{f"{name}_ms": float(np.median(values)) for name, values in samples.items()},
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_name", default="mobilenetv2")
    parser.add_argument("--input_size", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.model_name, args.input_size, args.batch_size)))
        return 0
    results: Dict[str, List[Dict[str, float]]] = {"false": [], "true": []}
    for _ in range(args.rounds):
        for bfc in ("false", "true"):
            environment = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC=bfc)
            output = subprocess.run([sys.executable, "-m", "bench.allocator", "--child", "--model_name", args.model_name,
                                     "--input_size", str(args.input_size), "--batch_size", str(args.batch_size)],
                                    cwd=ROOT, env=environment, capture_output=True, text=True, check=True).stdout
            result = json.loads(output.strip().splitlines()[-1])
            results[bfc].append(result)
            print(f"BFC {bfc:5}: full step {result['full_ms']:.1f} ms, top-60 step {result['top60_ms']:.1f} ms, "
                  f"peak RSS {result['rss_mb']:.0f} MB", flush=True)
    for key in ("full_ms", "top60_ms", "rss_mb"):
        ratio = statistics.median(r[key] for r in results["true"]) / statistics.median(r[key] for r in results["false"])
        print(f"{key}: BFC / default = {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
