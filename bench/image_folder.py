"""Does an image folder with its own validation/ train as well as the same folder carved (issue 53)?

Renders species of the embedded_parts target into ROOT/{train,validation,test}/<word>/<n>.png, class
folders named by words (so their sorted order is the label order), as a user's own folder would be;
then full training on it with --validation carved and --validation fresh is compared seed by seed:

    python -m bench.image_folder --root /tmp/folder            # 20 classes, 80 / 20 / 30 images a class
    for seed in 0 1 2; do for v in carved fresh; do
      python main.py --model_name mobilenetv2 --dataset_name image_folder --data_dir /tmp/folder \\
        --input_size 64 --batch_size 32 --learning_rate 0.003 --num_epochs 12 --bn_mode frozen \\
        --weights saved_models/source_parts_mobilenetv2_64.h5 --train_type full_training \\
        --seed $seed --validation $v --logdir logs/image_folder --run_name ${v}_s$seed
    done; done

Results: results/image_folder_validation.md.
"""
from __future__ import annotations

import argparse
import os
from typing import Optional, Sequence

from PIL import Image

from data import parts_render
from utils import UserError, run_cli

WORDS = ("alder", "birch", "cedar", "daisy", "elm", "fern", "ginkgo", "hazel", "iris", "juniper", "kale", "larch",
         "maple", "nettle", "oak", "pine", "quince", "rowan", "spruce", "tulip")


def render_folder(root: str, classes: int, sizes: dict, image_size: int = 64, task_seed: int = 0) -> None:
    """Write `sizes[split]` images a class of the first `classes` target species of task seed
    `task_seed` under root/<split>/<word>/ (each image from its own random stream, so the splits
    share no image)."""
    species = parts_render.target_species(task_seed)[:classes]
    for split, count in sizes.items():
        for label, creature in enumerate(species):
            folder = os.path.join(root, split, WORDS[label])
            os.makedirs(folder, exist_ok=True)
            for index in range(count):
                rng = parts_render.instance_rng(0, "target", split, label * 1000 + index)
                Image.fromarray(parts_render.render(creature, image_size, rng)).save(
                    os.path.join(folder, f"{index:03d}.png"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="the folder to create (must not exist)")
    parser.add_argument("--classes", type=int, default=20, help=f"classes, at most {len(WORDS)}")
    parser.add_argument("--train", type=int, default=80, help="training images a class")
    parser.add_argument("--validation", type=int, default=20, help="validation images a class")
    parser.add_argument("--test", type=int, default=30, help="test images a class")
    args = parser.parse_args(argv)
    if not 1 <= args.classes <= len(WORDS):
        raise UserError(f"--classes must be 1 to {len(WORDS)}, got {args.classes}")
    if os.path.exists(args.root):
        raise UserError(f"--root {args.root} exists; name a new folder (nothing was written)")
    render_folder(args.root, args.classes, {"train": args.train, "validation": args.validation, "test": args.test})
    print(f"wrote {args.root}: {args.classes} classes, train {args.train}, validation {args.validation}, "
          f"test {args.test} images a class")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main))
