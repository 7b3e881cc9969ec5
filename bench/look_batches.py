"""What do the held-out look's scored batches cost: the validation split shuffled whole (the twelfth
candidate's, schemes/heldout.py), shuffled in a buffer as large as the look scores (the
fourteenth's), and the training probe stream's next batches (the thirteenth's)? No training; the
data only.

    python -m bench.look_batches [--dataset_name embedded_shapes] [--count 3] [--repeats 5]

Each repeat does what one run's look does, cold: it loads the validation split afresh (a new
pipeline, so nothing of it is cached in memory yet), shuffles it with the run's seed and takes
`count` batches, once with the whole split's buffer and once with `count` x batch size images (in
alternating order, repeat by repeat), then takes the next `count` batches of the training probe
stream (built once, as a run's is, before its first probe). Prints each repeat and the medians, in
milliseconds.
"""
from __future__ import annotations

import argparse
import time
from typing import List

import numpy as np

import data
from schemes.heldout import HELD_OUT_BUFFER
from utils import positive_int


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--dataset_name", default="embedded_shapes",
                        help="a dataset with a validation split of its own (the embedded targets)")
    parser.add_argument("--batch_size", type=positive_int, default=32, help="batch size")
    parser.add_argument("--input_size", type=positive_int, default=64, help="image side in pixels")
    parser.add_argument("--count", type=positive_int, default=3,
                        help="batches a look scores (--probe_batches x selections a run makes: 3 in the study)")
    parser.add_argument("--repeats", type=positive_int, default=5, help="repeats, each a fresh validation pipeline")
    return parser.parse_args(argv)


def materialise(batches: List) -> None:
    for images, _ in batches:
        images.numpy()


def main(argv=None) -> int:
    args = parse_args(argv)
    train = data.load_epochs(args.dataset_name, args.batch_size, args.input_size, seed=0)
    position = 0
    materialise(train.probe(position, args.count))  # the stream as a run has it at its look (its updates' batches)
    position += args.count
    timings = {"whole split": [], "look-sized buffer": [], "training probe stream": []}
    variants = [("whole split", HELD_OUT_BUFFER), ("look-sized buffer", args.count * args.batch_size)]
    for repeat in range(args.repeats):
        for name, buffer in variants if repeat % 2 == 0 else variants[::-1]:
            start = time.perf_counter()
            validation = data.load(args.dataset_name, "validation", args.batch_size, args.input_size)
            shuffled = validation.unbatch().shuffle(buffer, seed=repeat, reshuffle_each_iteration=False)
            materialise(data.FixedEpochs(shuffled.batch(args.batch_size, drop_remainder=True)).probe(0, args.count))
            timings[name].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        materialise(train.probe(position, args.count))
        position += args.count
        timings["training probe stream"].append((time.perf_counter() - start) * 1000)
        print(f"repeat {repeat}: " + ", ".join(f"{name} {times[-1]:.1f} ms" for name, times in timings.items()))
    print(f"median of {args.repeats}: " + ", ".join(f"{name} {np.median(times):.1f} ms" for name, times in timings.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
