"""Memory across re-selections: does switching the trained tensors many times grow the process?

    python -m bench.reselection_memory --model_name mobilenetv2 --input_size 64
    python -m bench.reselection_memory --reselections 100 --cycle 12 --plot figures/reselection_memory.png

Each re-selection picks a new random set of tensors (as ElasticTrainer's selections differ),
fetches its compiled step from train_step.StepCache and trains two steps; the resident set size
(RSS) is printed after each. With --cycle K the selections cycle through K random masks (more
than the cache holds, so each one is evicted and compiled again: the worst case of a long run).
With the bounded cache (default, 8 steps) memory levels off
once the cache is full; --capacity 1000 shows what keeping every compiled step costs.
A benchmark: it prints, it asserts nothing.
"""
from __future__ import annotations

from elastic_trainer import tf_environment  # noqa: F401  (first: TensorFlow's environment before TensorFlow loads)
import argparse
import gc
import os
import sys

from elastic_trainer.command_line import run_cli
from elastic_trainer.files import atomic_path


def rss_mb() -> float:
    with open("/proc/self/status") as stream:
        for line in stream:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_name", default="mobilenetv2", help="the registry model")
    parser.add_argument("--input_size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--batch_size", type=int, default=32, help="images per step")
    parser.add_argument("--reselections", type=int, default=20, help="how many selections to switch to")
    parser.add_argument("--cycle", type=int, default=0,
                        help="cycle through this many random masks (0: a new random mask each time)")
    parser.add_argument("--capacity", type=int, default=None, help="compiled steps kept (default: train's)")
    parser.add_argument("--plot", default=None, help="also draw RSS against re-selections into this PNG (and a PDF)")
    args = parser.parse_args(argv)
    if args.reselections < 10:
        parser.error("--reselections must be at least 10 (memory is compared with the 10th)")
    import numpy as np

    import models
    import profiler
    import train_step
    from train_step import make_optimizer

    model = models.build_model(args.model_name, 64, args.input_size, "none")
    images, labels = profiler.random_batch(model, args.batch_size)
    capacity = args.capacity or train_step.CACHED_STEPS
    cache = train_step.StepCache(model, make_optimizer("sgd", 1e-3, 5e-4, 1000).optimizer, capacity=capacity)
    rng = np.random.default_rng(0)
    size = len(model.trainable_weights)
    print(f"{args.model_name} {args.input_size} px, batch {args.batch_size}, cache capacity {capacity}")
    print(f"{'selection':>9}{'tensors':>9}{'RSS MB':>9}")
    def random_mask():
        mask = (rng.random(size) < rng.random()).astype(np.uint8)
        mask[: rng.integers(size)] = 0
        mask[-2:] = 1  # always the classifier
        return mask

    cycle = [random_mask() for _ in range(args.cycle)]
    history = []
    for selection in range(1, args.reselections + 1):
        mask = cycle[(selection - 1) % len(cycle)] if cycle else random_mask()
        step = cache.get(mask)
        for _ in range(2):
            step(images, labels)[0].numpy()
        gc.collect()
        history.append(rss_mb())
        print(f"{selection:>9}{int(mask.sum()):>9}{history[-1]:>9.0f}", flush=True)
    full = min(capacity, len(history)) - 1
    print(f"RSS after the cache filled (selection {full + 1}): {history[full]:.0f} MB; after selection "
          f"{len(history)}: {history[-1]:.0f} MB ({history[-1] - history[full]:+.0f} MB)")
    print(f"RSS after selection {len(history)} / after selection 10: {history[-1] / history[9]:.3f}")
    if args.plot:
        draw(history, capacity, f"{args.model_name} {args.input_size} px, batch {args.batch_size}"
             + (f", cycling through {args.cycle} masks" if args.cycle else ", a new mask each time"), args.plot)
    return 0


def draw(history, capacity: int, title: str, output: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 3.5))
    axes.plot(range(1, len(history) + 1), history, marker=".")
    axes.axvline(capacity, color="grey", linestyle=":", label=f"compiled-step cache full ({capacity})")
    axes.set_xlabel("re-selections")
    axes.set_ylabel("resident memory (MB)")
    axes.set_ylim(0, max(history) * 1.1)
    axes.set_title(title, fontsize=10)
    axes.legend(loc="lower right")
    figure.tight_layout()
    for path in (output, os.path.splitext(output)[0] + ".pdf"):
        with atomic_path(path) as temporary:
            figure.savefig(temporary, format=os.path.splitext(path)[1][1:])
        print(f"wrote {path}")
    plt.close(figure)


if __name__ == "__main__":
    sys.exit(run_cli(main))
