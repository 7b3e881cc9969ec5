"""Figures from training runs: curves from TensorBoard events, bars from run summaries, and the
selection heat map of an elastic run.

    python scripts/plot.py curves logs/demo/T/full_training logs/demo/T/elastic --output figures/c.png
    python scripts/plot.py curves RUN... --tag test/accuracy --tag train/classification_loss --x step
    python scripts/plot.py bars logs/figures/17ac/* --output figures/bars.png
    python scripts/plot.py bars results/study/mobilenetv2_64/claims       (a folder of summaries)
    python scripts/plot.py heatmap logs/demo/T/elastic --output figures/selection.png
    python scripts/plot.py energy logs/figures/paper/* --output figures/energy.png   (Fig. 23)

curves: any scalar tag of the runs' events against training wall time (evaluation excluded, the
paper's x axis), step or epoch; several runs per plot, one panel per tag; prints each run's best
accuracy, time and time to reach the first run's final accuracy. bars: wall time and best
accuracy of each run (runs that differ only in their `_s<seed>` suffix are averaged, with the
standard deviation as error bar). heatmap: which tensors each selection trained, over training
progress (the paper's figure of selections over epochs). energy: training energy and energy per
step of the runs that metered it (main.py --energy_meter), averaged like bars. Every figure is written as PNG and PDF.
"""
from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import statistics
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from elastic_trainer import selection_picture
from elastic_trainer.command_line import UserError, run_cli
from elastic_trainer.files import atomic_path
from elastic_trainer.record_names import (BLOCKS_TAG, CLASSIFIER_TAG, IMPORTANCE_TAG, INTERNALS, SELECTION_TAG,
                                          SPLITS, reported_accuracy)
from experiments.study_table import config_name  # (runs that differ only in seed share it)

MASK_TAG = "elastic/selection_masks"  # runs logged before the pictures: a band of pixels per selection so far

TIME_TAG = "time/train_seconds"  # logged at the end of every epoch, evaluation excluded
X_AXES = ("time", "step", "epoch")
Series = List[Tuple[int, float]]  # (step, value)
DPI = 120  # of the PNG figures


def scalar_name(tag: str) -> str:
    """The name of the scalar written under `tag` (the inverse of record_names.shown_scalar's tag; a tag of a
    run logged before shown_scalar is its own name). Its unit is in the tag's description: "percent"
    when written in percent."""
    group, _, rest = tag.partition("/")
    if group == INTERNALS:
        return rest
    if group in ("accuracy", "loss") and rest in SPLITS:
        return f"{rest}/{'accuracy' if group == 'accuracy' else 'classification_loss'}"
    return tag


class Run:
    """The scalar series of one run's TensorBoard events, read with tensorboard's own reader, by
    the names the loop gives them ("validation/accuracy", as fractions) or by their TensorBoard
    tags (record_names.shown_scalar)."""

    def __init__(self, run_dir: str, label: Optional[str] = None):
        from tensorboard.backend.event_processing import event_accumulator

        if not os.path.isdir(run_dir):
            raise UserError(f"no run at {run_dir}; {runs_beside(run_dir)}")
        self.run_dir = run_dir
        self.label = label or os.path.basename(os.path.normpath(run_dir))
        self._events = event_accumulator.EventAccumulator(run_dir, size_guidance={"tensors": 0})
        self._events.Reload()
        tensors = self._events.Tags()["tensors"]
        if not tensors:
            raise UserError(f"{run_dir} has no TensorBoard events (not a main.py run's folder?); "
                            f"{runs_beside(run_dir)}")
        scalars = [tag for tag in tensors if self._events.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"]
        self._stored = {scalar_name(tag): tag for tag in scalars}  # name -> the tag it was written under
        self.tags = sorted(self._stored)  # the scalars' names
        self._all_tags = set(tensors)

    def series(self, tag: str) -> Series:
        """(step, value) of a scalar, by name or TensorBoard tag, percentages read back as fractions;
        UserError naming the run's tags when it has no such scalar."""
        import tensorflow as tf

        stored = self._stored.get(tag, tag if tag in self._stored.values() else None)
        if stored is None:
            kind = "scalar tag" if tag not in self._all_tags else "scalar tag (it is an image)"
            raise UserError(f"run {self.run_dir} has no {kind} {tag!r}; its scalar tags: "
                            f"{', '.join(sorted(self._stored.values()))}")
        scale = 0.01 if self._events.SummaryMetadata(stored).summary_description == "percent" else 1.0
        return [(event.step, scale * float(tf.make_ndarray(event.tensor_proto)))
                for event in self._events.Tensors(stored)]

    def blocks(self) -> List[Tuple[str, int]]:
        """(block name, first tensor index) of the model's blocks, when the run logged them."""
        import tensorflow as tf

        if BLOCKS_TAG not in self._all_tags:
            return []
        return [tuple(item) for item in json.loads(tf.make_ndarray(self._events.Tensors(BLOCKS_TAG)[0].tensor_proto)
                                                   .item().decode())]

    def classifier(self) -> Optional[int]:
        """The classifier's first tensor index, when the run logged it."""
        import tensorflow as tf

        if CLASSIFIER_TAG not in self._all_tags:
            return None
        return int(json.loads(tf.make_ndarray(self._events.Tensors(CLASSIFIER_TAG)[0].tensor_proto).item().decode())[0])

    def steps_per_epoch(self) -> int:
        """Steps of one epoch: the step at which the first epoch's time was logged."""
        return max(1, self.series(TIME_TAG)[0][0])

    def seconds_at(self, steps: Sequence[int]) -> List[float]:
        """Training seconds at each step, interpolated between the epoch ends (0 s at step 0)."""
        import numpy as np

        known = [(0, 0.0)] + self.series(TIME_TAG)
        return list(np.interp(steps, [s for s, _ in known], [v for _, v in known]))

    def importances(self) -> List[Tuple[int, List[float]]]:
        """(step, importance in model order) of every selection that logged one (none before it was logged)."""
        import tensorflow as tf

        if IMPORTANCE_TAG not in self._all_tags:
            return []
        return [(event.step, json.loads(tf.make_ndarray(event.tensor_proto).item().decode()))
                for event in self._events.Tensors(IMPORTANCE_TAG)]

    def masks(self) -> List[Tuple[int, List[int]]]:
        """(step, mask) of every selection, from the text each selection logs (runs logged before
        it: the last row of the picture each selection logged; dark = trained)."""
        import numpy as np
        import tensorflow as tf

        if SELECTION_TAG in self._all_tags:  # each selection as text ("0110...")
            return [(event.step, [int(c) for c in tf.make_ndarray(event.tensor_proto).item().decode()])
                    for event in self._events.Tensors(SELECTION_TAG)]
        if MASK_TAG not in self._all_tags:
            raise UserError(f"run {self.run_dir} has no selections logged ({SELECTION_TAG})")
        selections = []  # the image's last row, one pixel a tensor
        for event in self._events.Tensors(MASK_TAG):
            encoded = tf.make_ndarray(event.tensor_proto)[2]  # [width, height, png]
            image = tf.io.decode_png(encoded).numpy()[..., 0]
            selections.append((event.step, [int(v) for v in (image[-1] < 128).astype(np.int32)]))
        return selections


def runs_beside(path: str) -> str:
    """What runs exist in the folder `path` names a run of (for error messages)."""
    parent = os.path.dirname(os.path.normpath(path)) or "."
    if not os.path.isdir(parent):
        return f"{parent} does not exist either"
    runs = sorted(name for name in os.listdir(parent) if os.path.isdir(os.path.join(parent, name))
                  and any(f.startswith("events.out.tfevents") or f == "summary.json"
                          for f in os.listdir(os.path.join(parent, name))))
    return f"runs in {parent}: {', '.join(runs)}" if runs else f"{parent} holds no runs"


def x_values(run: Run, steps: Sequence[int], axis: str) -> List[float]:
    if axis == "step":
        return [float(s) for s in steps]
    if axis == "epoch":
        return [s / run.steps_per_epoch() for s in steps]
    return run.seconds_at(steps)


def time_unit(max_seconds: float) -> Tuple[str, float]:
    """Hours for runs of hours (the paper's unit), minutes below."""
    return ("h", 3600.0) if max_seconds >= 2 * 3600 else ("min", 60.0)


def time_to_reach(run: Run, accuracy: float) -> Optional[float]:
    """Training seconds at the end of the first epoch whose test accuracy reaches `accuracy`."""
    seconds = dict(run.series(TIME_TAG))
    for step, value in run.series("test/accuracy"):
        if value >= accuracy - 1e-9:
            return seconds.get(step, run.seconds_at([step])[0])
    return None


def reach_table(runs: Sequence[Run]) -> str:
    """Best and final accuracy, training time, and time to reach the first run's final accuracy."""
    reference = runs[0]
    goal = reference.series("test/accuracy")[-1][1]
    goal_time = time_to_reach(reference, goal)
    width = max(36, *(len(run.label) + 2 for run in runs))  # the labels' column, wide enough for every label
    lines = [f"{'run':<{width}}{'best acc %':>11}{'final acc %':>12}{'train s':>9}"
             f"{'s to ' + format(100 * goal, '.1f') + '%':>12}{'speedup':>9}"]
    for run in runs:
        accuracy = [v for _, v in run.series("test/accuracy")]
        reach = time_to_reach(run, goal)
        speedup = f"{goal_time / reach:.2f}x" if reach and goal_time else "never"
        lines.append(f"{run.label:<{width}}{100 * max(accuracy):>11.2f}{100 * accuracy[-1]:>12.2f}"
                     f"{run.series(TIME_TAG)[-1][1]:>9.1f}{(f'{reach:.1f}' if reach else '-'):>12}{speedup:>9}")
    return "\n".join(lines)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(figure, path: str) -> List[str]:
    """Write the figure as PNG (or the path's extension) and as PDF beside it, atomically."""
    root, extension = os.path.splitext(path)
    paths = [path if extension else root + ".png", root + ".pdf"]
    for target in dict.fromkeys(paths):
        with atomic_path(target) as temporary:
            figure.savefig(temporary, dpi=DPI, format=os.path.splitext(target)[1][1:])
    return list(dict.fromkeys(paths))


def finish(figure, title: str, output: str) -> List[str]:
    """Title, layout, write (PNG and PDF), close; the paths written."""
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    paths = save(figure, output)
    _pyplot().close(figure)
    return paths


def _label(tag: str) -> str:
    names = {"test/accuracy": "test accuracy (%)", "validation/accuracy": "validation accuracy (%)",
             "train/accuracy": "training accuracy (%)",
             "train/classification_loss": "training loss", "test/classification_loss": "test loss"}
    return names.get(tag, tag)


def plot_curves(runs: Sequence[Run], tags: Sequence[str], axis: str, title: str, output: str) -> List[str]:
    plt = _pyplot()
    data = {(run.label, tag): run.series(tag) for run in runs for tag in tags}  # errors before drawing
    unit, scale = time_unit(max(run.series(TIME_TAG)[-1][1] for run in runs)) if axis == "time" else ("", 1.0)
    figure, panels = plt.subplots(1, len(tags), figsize=(5 * len(tags), 3.8), squeeze=False)
    for panel, tag in zip(panels[0], tags):
        percent = 100.0 if tag.endswith("accuracy") else 1.0
        for run in runs:
            steps, values = zip(*data[(run.label, tag)])
            xs = [x / scale for x in x_values(run, steps, axis)]
            panel.plot(xs, [percent * v for v in values], marker="o" if len(xs) < 40 else None,
                       markersize=3, label=run.label)
        xlabel = {"time": f"training wall time ({unit}, evaluation excluded)", "step": "training step",
                  "epoch": "epoch"}[axis]
        panel.set(xlabel=xlabel, ylabel=_label(tag))
        panel.grid(alpha=0.3)
    panels[0][0].legend(fontsize=8)
    return finish(figure, title, output)


def load_summaries(inputs: Sequence[str]) -> List[Dict]:
    """Run summaries from run folders (their summary.json), summary files, or folders of them."""
    summaries = []
    for item in inputs:
        if os.path.isfile(os.path.join(item, "summary.json")):
            paths = [os.path.join(item, "summary.json")]
        elif os.path.isdir(item):
            paths = sorted(glob.glob(os.path.join(item, "*.json")))
            if not paths:
                raise UserError(f"{item} has neither a summary.json (a finished run) nor summary files")
        elif os.path.isfile(item):
            paths = [item]
        else:
            raise UserError(f"no run or summary at {item}; {runs_beside(item)}")
        for path in paths:
            try:
                with open(path) as handle:
                    summary = json.load(handle)
            except (OSError, ValueError) as error:
                raise UserError(f"cannot read the run summary {path}: {error}") from None
            if not isinstance(summary, dict) or "final_test_accuracy" not in summary:
                raise UserError(f"{path} is not a run summary (no final_test_accuracy)")
            summary.setdefault("run_name", os.path.basename(os.path.dirname(path)))
            summaries.append(summary)
    return summaries


def _mean_std(values: Sequence[float]) -> Tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def bar_rows(summaries: Sequence[Dict]) -> List[Dict]:
    """One row per config in input order: mean and std over seeds of wall time and test accuracy
    (the best over epochs where every epoch was tested, else the final epoch's)."""
    groups: Dict[str, List[Dict]] = {}
    for summary in summaries:
        groups.setdefault(config_name(summary["run_name"]), []).append(summary)

    return [{"config": name, "runs": len(runs),
             "seconds": _mean_std([run["train_seconds"] for run in runs]),
             "accuracy": _mean_std([100 * reported_accuracy(run) for run in runs])}
            for name, runs in groups.items()]


def plot_bars(rows: Sequence[Dict], title: str, output: str) -> List[str]:
    plt = _pyplot()
    unit, scale = time_unit(max(row["seconds"][0] for row in rows))
    figure, (time_panel, accuracy_panel) = plt.subplots(1, 2, figsize=(max(8, 1.1 * len(rows) + 4), 4.2))
    names = [row["config"] for row in rows]
    positions = range(len(rows))
    colors = [plt.get_cmap("tab10")(index % 10) for index in positions]
    time_panel.bar(positions, [row["seconds"][0] / scale for row in rows],
                   yerr=[row["seconds"][1] / scale for row in rows], color=colors, capsize=3)
    accuracy_panel.bar(positions, [row["accuracy"][0] for row in rows],
                       yerr=[row["accuracy"][1] for row in rows], color=colors, capsize=3)
    for panel, key, digits, divisor in ((time_panel, "seconds", 2, scale), (accuracy_panel, "accuracy", 1, 1.0)):
        for position, row in zip(positions, rows):
            panel.annotate(f"{row[key][0] / divisor:.{digits}f}", (position, row[key][0] / divisor),
                           textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
    time_panel.set(ylabel=f"training wall time ({unit})")
    accuracy_panel.set(ylabel="test accuracy (%): best over epochs, or final")
    for panel in (time_panel, accuracy_panel):
        panel.set_xticks(list(positions))
        panel.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
        panel.grid(axis="y", alpha=0.3)
    if any(row["runs"] > 1 for row in rows):
        accuracy_panel.set_title("mean ± std over seeds", fontsize=9)
    return finish(figure, title, output)


def energy_rows(summaries: Sequence[Dict]) -> List[Dict]:
    """One row per config (input order) of the runs that metered energy: mean and std over seeds
    of the training energy and of joules per step. UserError when no run did."""
    groups: Dict[str, List[Dict]] = {}
    for summary in summaries:
        if summary.get("energy_joules") is not None:
            groups.setdefault(config_name(summary["run_name"]), []).append(summary)
    if not groups:
        raise UserError("none of these runs measured energy: their device exposed no readable meter "
                        "(main.py --energy_meter; elastic_trainer/energy.py lists the readers)")

    return [{"config": name, "runs": len(runs), "meter": runs[0].get("energy_meter"),
             "joules": _mean_std([run["energy_joules"] for run in runs]),
             "per_step": _mean_std([run["joules_per_step"] for run in runs])} for name, runs in groups.items()]


def plot_energy(rows: Sequence[Dict], title: str, output: str) -> List[str]:
    """The paper's Fig. 23 kind: training energy per scheme, and energy per step, as bars."""
    plt = _pyplot()
    figure, panels = plt.subplots(1, 2, figsize=(max(8, 1.1 * len(rows) + 4), 4.2))
    positions = list(range(len(rows)))
    colors = [plt.get_cmap("tab10")(index % 10) for index in positions]
    scale, unit = (1000.0, "kJ") if max(row["joules"][0] for row in rows) >= 10000 else (1.0, "J")
    for panel, key, divisor, label in ((panels[0], "joules", scale, f"training energy ({unit})"),
                                       (panels[1], "per_step", 1.0, "energy per training step (J)")):
        panel.bar(positions, [row[key][0] / divisor for row in rows], yerr=[row[key][1] / divisor for row in rows],
                  color=colors, capsize=3)
        for position, row in zip(positions, rows):
            panel.annotate(f"{row[key][0] / divisor:.3g}", (position, row[key][0] / divisor),
                           textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
        panel.set(ylabel=label)
        panel.set_xticks(positions)
        panel.set_xticklabels([row["config"] for row in rows], rotation=35, ha="right", fontsize=8)
        panel.grid(axis="y", alpha=0.3)
    meters = sorted({str(row["meter"]) for row in rows})
    panels[0].set_title(f"whole device, meter: {', '.join(meters)}", fontsize=9)
    return finish(figure, title, output)


def rotation_shares(run: Run, starts: Sequence[int]) -> List[Optional[float]]:
    """For each selection (by its start step), the share of its period's steps that trained it, when
    the run rotated its selection with the classifier alone (rotating_anchored_training logs
    rotation/on at each selection and rotation/reach_share when a period ends); None for a period
    trained whole. The last period's share is not logged (no selection ends it): the one before it
    stands in."""
    if not {"rotation/on", "rotation/reach_share"} <= set(run.tags):
        return [None] * len(starts)
    on, ended = dict(run.series("rotation/on")), dict(run.series("rotation/reach_share"))
    shares: List[Optional[float]] = []
    for index, start in enumerate(starts):
        share = ended.get(starts[index + 1]) if index + 1 < len(starts) else None
        if share is None:
            share = next((value for value in reversed(shares) if value is not None), None)
        shares.append(share if on.get(start) else None)
    return shares


def plot_heatmap(run: Run, title: str, output: str) -> List[str]:
    """The run's selections against training progress in epochs, drawn as TensorBoard's picture of
    them (selection_picture.draw): tensors from the input (bottom) to the classifier (top), blocks
    named at the side, each band labelled with its selection's step and epoch; dark = trained."""
    import numpy as np

    plt = _pyplot()
    selections = run.masks()
    steps_per_epoch = run.steps_per_epoch()
    end_step = max(run.series(TIME_TAG)[-1][0], selections[-1][0] + 1)
    starts = [step for step, _ in selections]
    shares = rotation_shares(run, starts)
    masks = np.array([mask for _, mask in selections], dtype=float)
    trained = masks.sum(axis=1)
    figure = plt.figure(figsize=(7, 4.8))
    axis = figure.add_axes([0.17, 0.08, 0.79, 0.78])
    selection_picture.draw(axis, masks, [step / steps_per_epoch for step in starts + [end_step]],
                           selection_picture.band_labels(starts, steps_per_epoch), run.blocks(), run.classifier(),
                           shades=[1.0 if share is None else share for share in shares])
    axis.set_xlabel("training progress: each band from its selection to the next (width in epochs)", fontsize=8)
    figure.text(0.02, 0.98, title or f"{run.label}: tensors trained by each selection (dark)", fontsize=10, va="top")
    rotated = [share for share in shares if share is not None]
    note = (f"; rotating: the selection on {100 * min(rotated):.0f}-{100 * max(rotated):.0f} % of steps, the "
            f"classifier alone on the rest (grey: that share)" if rotated else "")
    axis.text(0.01, 0.01, f"{len(selections)} selections; {int(trained.min())}-{int(trained.max())} of "
              f"{masks.shape[1]} tensors trained{note}", transform=axis.transAxes, fontsize=8 if not rotated else 6,
              bbox=dict(facecolor="white", alpha=0.8, linewidth=0))
    paths = save(figure, output)
    plt.close(figure)
    return paths


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    curves = commands.add_parser("curves", help="scalar tags of runs against time, step or epoch",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    curves.add_argument("runs", nargs="+", help="run log folders (<logdir>/<run_name>); the first is the "
                                                "reference of the printed 'time to reach' table")
    curves.add_argument("--tag", action="append", default=None,
                        help="scalar tag to plot, one panel each, repeatable (default: test/accuracy when "
                             "every run tested every epoch (main.py --test_every_epoch), else "
                             "validation/accuracy; and train/classification_loss)")
    curves.add_argument("--x", choices=X_AXES, default="time",
                        help="x axis: training wall time (evaluation excluded), step or epoch")
    curves.add_argument("--labels", nargs="+", default=None, help="legend labels, one per run")
    bars = commands.add_parser("bars", help="wall time and best accuracy of runs, mean ± std over seeds",
                               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    bars.add_argument("runs", nargs="+", help="run folders with a summary.json, summary .json files, "
                                              "or folders of them (e.g. results/study/...)")
    energy = commands.add_parser("energy", help="training energy and energy per step of runs (the paper's Fig. 23), "
                                                "mean ± std over seeds; runs without a reading are left out",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    energy.add_argument("runs", nargs="+", help="run folders with a summary.json, summary .json files, "
                                                "or folders of them")
    heatmap = commands.add_parser("heatmap", help="tensors trained by each selection of an elastic run",
                                  formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    heatmap.add_argument("run", help="an elastic run's log folder")
    for command in (curves, bars, energy, heatmap):
        command.add_argument("--output", required=True, help="figure path (.png; a .pdf is written beside it)")
        command.add_argument("--title", default="", help="figure title")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # "No path found after ..." chatter
    if args.command == "curves":
        if args.labels and len(args.labels) != len(args.runs):
            raise UserError(f"--labels gives {len(args.labels)} labels for {len(args.runs)} runs")
        runs = [Run(path, label) for path, label in zip(args.runs, args.labels or [None] * len(args.runs))]
        accuracy_tag = "test/accuracy" if all("test/accuracy" in run.tags for run in runs) else "validation/accuracy"
        paths = plot_curves(runs, args.tag or [accuracy_tag, "train/classification_loss"], args.x,
                            args.title, args.output)
        if all("test/accuracy" in run.tags for run in runs):
            print(reach_table(runs))
    elif args.command in ("bars", "energy"):  # summaries -> rows -> bars, and a line per row
        rows_of, draw, line = {
            "bars": (bar_rows, plot_bars, lambda row: f"{row['seconds'][0]:8.1f} s  "
                                                      f"{row['accuracy'][0]:6.2f} ± {row['accuracy'][1]:.2f} %"),
            "energy": (energy_rows, plot_energy, lambda row: f"{row['joules'][0]:10.1f} ± {row['joules'][1]:.1f} J  "
                                                             f"{row['per_step'][0]:8.3f} J/step  ({row['meter']})"),
        }[args.command]
        rows = rows_of(load_summaries(args.runs))
        paths = draw(rows, args.title, args.output)
        for row in rows:
            print(f"{row['config']:<40} {row['runs']} run(s)  {line(row)}")
    else:
        paths = plot_heatmap(Run(args.run), args.title, args.output)
    print("wrote " + " and ".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
