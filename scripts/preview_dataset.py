"""Save a grid of example images of a dataset: `python scripts/preview_dataset.py embedded_shapes`."""
from __future__ import annotations

import _bootstrap  # noqa: F401  (first: the repository root on sys.path, TensorFlow's environment)
import argparse
import os
import sys

from elastic_trainer.command_line import UserError, run_cli
from elastic_trainer.files import atomic_path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset_name", help="a registered dataset, e.g. embedded_shapes")
    parser.add_argument("--classes", type=int, default=8, help="rows: the first N classes")
    parser.add_argument("--per_class", type=int, default=8, help="columns: examples per class")
    parser.add_argument("--input_size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--data_dir", default=None, help="TFDS data dir (default: TFDS's)")
    parser.add_argument("--output", default="figures/{dataset_name}_samples.png",
                        help="output image (a .pdf is written beside it)")
    args = parser.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import data

    grid = [[] for _ in range(args.classes)]
    for images, labels in data.load(args.dataset_name, "test", 256, args.input_size, args.data_dir):
        for image, label in zip(images.numpy().astype(np.uint8), labels.numpy()):
            if label < args.classes and len(grid[label]) < args.per_class:
                grid[label].append(image)
        if all(len(row) == args.per_class for row in grid):
            break
    if not all(grid):
        raise UserError(f"{args.dataset_name} has fewer than {args.classes} classes in its test split")
    blank = np.full_like(grid[0][0], 255)
    rows = [np.concatenate(row + [blank] * (args.per_class - len(row)), axis=1) for row in grid]
    figure = plt.figure(figsize=(args.per_class, args.classes))
    plt.imshow(np.concatenate(rows, axis=0))
    plt.axis("off")
    plt.title(f"{args.dataset_name}: one class per row")
    output = args.output.format(dataset_name=args.dataset_name)
    for path in (output, os.path.splitext(output)[0] + ".pdf"):
        with atomic_path(path) as temporary:
            figure.savefig(temporary, bbox_inches="tight", dpi=100)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
