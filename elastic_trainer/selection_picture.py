"""The picture of a run's selections, for TensorBoard and for a study's heat maps: tensors from the
input (bottom) to the classifier (top, marked), block names along the side, one band per selection
(dark = trained) labelled with its step and epoch.

Imports no TensorFlow (experiments/plot.py draws without it); matplotlib is imported when drawing.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

# TensorBoard shows an image at its card's width (about 350 px) unless "Show actual image size" is
# ticked: drawn at that width, nothing is scaled away.
WIDTH_PX = 350
ROW_PX = (2, 14)  # a tensor's row height in the TensorBoard picture, at least and at most
ROWS_PX = (120, 340)  # the tensor rows' total height there, at least and at most
LINE = 1.15  # a label's line height, in multiples of its font size
TRAINED, CLASSIFIER = "#303030", "tab:orange"


def band_labels(steps: Sequence[Optional[int]], steps_per_epoch: Optional[int]) -> List[str]:
    """"step S" and "epoch E" (epochs counted from 0, as the selection's start) for each band."""
    labels = []
    for step in steps:
        if step is None:
            labels.append("")
            continue
        epoch = f"\nepoch {step / steps_per_epoch:.3g}" if steps_per_epoch else ""
        labels.append(f"step {step}{epoch}")
    return labels


def block_ticks(blocks: Sequence[Tuple[str, int]], tensors: int, classifier: Optional[int],
                rows_per_label: float) -> List[Tuple[float, str]]:
    """(height, name) of the block names along the side: each at its block's middle, the
    classifier's first, then the others from the input up wherever a name keeps `rows_per_label`
    tensor rows (a label's height) from every one already placed."""
    starts = sorted((int(start), str(name)) for name, start in blocks if 0 <= int(start) < tensors)
    bounds = [start for start, _ in starts] + [classifier if classifier is not None else tensors]
    spans = [(name, start, max(stop, start + 1)) for (start, name), stop in zip(starts, bounds[1:])]
    if classifier is not None:
        spans.insert(0, ("classifier", classifier, tensors))
    placed: List[Tuple[float, str]] = []
    for name, start, stop in spans:
        middle = (start + stop) / 2
        if all(abs(middle - other) >= rows_per_label for other, _ in placed):
            placed.append((middle, name))
    return sorted(placed)


def draw(axis, masks: np.ndarray, edges: Sequence[float], labels: Sequence[str],
         blocks: Sequence[Tuple[str, int]], classifier: Optional[int],
         shades: Optional[Sequence[float]] = None, fontsize: float = 7) -> None:
    """Draw the selections `masks` (selections x tensors, 1 = trained) on a matplotlib `axis`:
    selection i fills x from edges[i] to edges[i + 1], labelled labels[i] above; rows are tensors
    (input at the bottom), grey lines where `blocks` (name, first tensor) begin, the classifier's
    trained cells (from its first tensor `classifier`; None: not known) in orange. `shades`: how dark
    each selection's cells are (1: black). Overlapping block names are left out (block_ticks)."""
    from matplotlib.colors import LinearSegmentedColormap

    masks = np.asarray(masks, dtype=float)
    tensors = masks.shape[1]
    grid = masks.T * (np.ones(len(masks)) if shades is None else np.asarray(shades, dtype=float))
    rows = np.arange(tensors + 1)
    for first, colour in ((0, TRAINED), (classifier, CLASSIFIER)):  # the classifier's cells over the rest
        if first is not None and 0 <= first < tensors:
            axis.pcolormesh(edges, rows[first:], np.ma.masked_equal(grid[first:], 0), vmin=0, vmax=1,
                            cmap=LinearSegmentedColormap.from_list(colour, ["white", colour]), antialiased=False)
    for name, start in blocks:
        if 0 < start < tensors:
            axis.axhline(start, color="tab:blue", linewidth=0.5, alpha=0.5)
    for edge in edges[1:-1]:
        axis.axvline(edge, color="white", linewidth=1.0)
    label_px = fontsize * LINE * axis.figure.dpi / 72
    ticks = block_ticks(blocks, tensors, classifier, label_px / (axis.get_window_extent().height / tensors))
    axis.set_yticks([height for height, _ in ticks])
    axis.set_yticklabels([name for _, name in ticks], fontsize=fontsize)
    for tick, (_, name) in zip(axis.get_yticklabels(), ticks):
        if name == "classifier":
            tick.set_color(CLASSIFIER)
            tick.set_fontweight("bold")
    axis.tick_params(axis="y", length=2, pad=2)
    axis.set_ylim(0, tensors)
    axis.set_xlim(edges[0], edges[-1])
    axis.xaxis.tick_top()
    middles = [(left + right) / 2 for left, right in zip(edges[:-1], edges[1:])]
    shown = thinned(middles, labels, axis)
    axis.set_xticks([middles[i] for i in shown])
    axis.set_xticklabels([labels[i] for i in shown], fontsize=fontsize - 0.5, linespacing=1.0)
    axis.tick_params(axis="x", length=0, pad=2)


def thinned(middles: Sequence[float], labels: Sequence[str], axis) -> List[int]:
    """Indices of the band labels to show: each band's, unless neighbours would overlap (then
    every k-th from the first)."""
    if len(middles) <= 1:
        return list(range(len(middles)))
    width_px = axis.get_window_extent().width
    span = (max(middles) - min(middles)) or 1.0
    gap_px = min(b - a for a, b in zip(middles[:-1], middles[1:])) / span * width_px * (len(middles) - 1) / len(middles)
    longest = max((len(line) for label in labels for line in label.splitlines()), default=1)
    needed = longest * 4.2 + 6  # a 6.5-point character is about 4 pixels wide
    every = max(1, int(np.ceil(needed / max(gap_px, 1.0))))
    return list(range(0, len(middles), every))


def picture(masks: Sequence[Sequence[float]], steps: Sequence[Optional[int]], blocks: Sequence[Tuple[str, int]],
            classifier: Optional[int], steps_per_epoch: Optional[int], title: str) -> np.ndarray:
    """The selections as an RGB picture (height, WIDTH_PX, 3) of uint8 for TensorBoard: equal
    bands, one per selection in order, each labelled with its step and epoch."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    masks = np.asarray(masks, dtype=float)
    tensors = masks.shape[1]
    rows_px = min(max(tensors * ROW_PX[0], ROWS_PX[0]), ROWS_PX[1], tensors * ROW_PX[1])
    top_px, bottom_px, left_px, right_px = 40, 6, 84, 16
    height_px = int(round(rows_px + top_px + bottom_px))
    figure = Figure(figsize=(WIDTH_PX / 100, height_px / 100), dpi=100)
    canvas = FigureCanvasAgg(figure)
    axis = figure.add_axes([left_px / WIDTH_PX, bottom_px / height_px, 1 - (left_px + right_px) / WIDTH_PX,
                            rows_px / height_px])
    draw(axis, masks, np.arange(len(masks) + 1), band_labels(steps, steps_per_epoch), blocks, classifier)
    figure.text(0.01, 1 - 3 / height_px, title, fontsize=7, va="top", ha="left")
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
