"""Plot test accuracy and training loss against training wall time for several runs.

    python scripts/plot_runs.py logs/run_a logs/run_b --output figures/comparison.png

Reads the TensorBoard events each run wrote (test/accuracy, train/classification_loss and
time/train_seconds, the training time without validation), like the paper's Figures 15-16,
and prints a table with each run's best accuracy, wall time and time to reach the first
run's final accuracy.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from utils import UserError, atomic_path, prepare_tensorflow_environment, run_cli  # noqa: E402


def read_run(run_dir: str) -> Dict[str, List[float]]:
    """Per-epoch series of a run: seconds, test accuracy, train loss (from its events)."""
    from tensorboard.backend.event_processing import event_accumulator
    import tensorflow as tf

    if not os.path.isdir(run_dir):
        raise UserError(f"{run_dir} is not a run's log folder")
    accumulator = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0})
    accumulator.Reload()
    tags = accumulator.Tags()["tensors"]
    needed = ["time/train_seconds", "test/accuracy", "train/classification_loss"]
    if not all(tag in tags for tag in needed):
        raise UserError(f"{run_dir} has no per-epoch training events (not a finished main.py run?)")
    series = {tag: [float(tf.make_ndarray(e.tensor_proto)) for e in accumulator.Tensors(tag)] for tag in needed}
    label = os.path.basename(os.path.normpath(run_dir))
    return {"label": label, "seconds": series["time/train_seconds"], "accuracy": series["test/accuracy"],
            "loss": series["train/classification_loss"]}


def time_to_reach(run: Dict, accuracy: float) -> Optional[float]:
    """Training seconds until the run's test accuracy first reaches `accuracy` (None: never)."""
    for seconds, value in zip(run["seconds"], run["accuracy"]):
        if value >= accuracy - 1e-9:
            return seconds
    return None


def table(runs: List[Dict]) -> str:
    reference = runs[0]
    goal = reference["accuracy"][-1]
    goal_time = time_to_reach(reference, goal)
    lines = [f"{'run':<36}{'best acc %':>11}{'final acc %':>12}{'train s':>9}"
             f"{'s to ' + format(100 * goal, '.1f') + '%':>12}{'speedup':>9}"]
    for run in runs:
        reach = time_to_reach(run, goal)
        speedup = f"{goal_time / reach:.2f}x" if reach else "never"
        lines.append(f"{run['label']:<36}{100 * max(run['accuracy']):>11.2f}{100 * run['accuracy'][-1]:>12.2f}"
                     f"{run['seconds'][-1]:>9.1f}{(f'{reach:.1f}' if reach else '-'):>12}{speedup:>9}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run log folders (logs/<run_name>); the first is the "
                                                "reference for 'time to reach'")
    parser.add_argument("--output", default="figures/accuracy_vs_time.png",
                        help="figure path (a .pdf is written beside it)")
    parser.add_argument("--title", default="", help="figure title")
    args = parser.parse_args(argv)
    prepare_tensorflow_environment()
    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # "No path found after ..." chatter
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [read_run(run) for run in args.runs]
    figure, (accuracy_axis, loss_axis) = plt.subplots(1, 2, figsize=(10, 3.8))
    for run in runs:
        minutes = [s / 60 for s in run["seconds"]]
        accuracy_axis.plot(minutes, [100 * a for a in run["accuracy"]], marker="o", label=run["label"])
        loss_axis.plot(minutes, run["loss"], marker="o", label=run["label"])
    accuracy_axis.set(xlabel="training wall time (min, validation excluded)", ylabel="test accuracy (%)")
    loss_axis.set(xlabel="training wall time (min, validation excluded)", ylabel="training loss")
    accuracy_axis.legend(fontsize=8)
    accuracy_axis.grid(alpha=0.3)
    loss_axis.grid(alpha=0.3)
    if args.title:
        figure.suptitle(args.title)
    figure.tight_layout()
    for path in (args.output, os.path.splitext(args.output)[0] + ".pdf"):
        with atomic_path(path) as temporary:
            figure.savefig(temporary, dpi=120)
    print(table(runs))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
