"""What a memory budget's micro-batched importance probe costs when each new chunk count traces
its gradient function again (exact batch shapes), against one function traced for any
micro-batch size (a free batch dimension, what schemes/elastic.py uses). One process, the two
variants alternated in ABBA order, each from a fresh probe (a run's first selection traces too).

    python -m bench.probe_chunks [--size 128] [--batch 32] [--counts 3 2 4 3 6] [--repeats 2]

Each variant probes one batch (ElasticTrainer's loss change: two gradient passes) once per
chunk count in `--counts`, as a budgeted run's successive selections would when the room for
the probe changes. Printed: seconds per variant and their ratio. A benchmark: it prints, it
asserts nothing; run it alone.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import List

from elastic_trainer.command_line import positive_int


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--size", type=positive_int, default=128, help="input size (px) of MobileNetV2")
    parser.add_argument("--batch", type=positive_int, default=32, help="probe batch size")
    parser.add_argument("--counts", type=positive_int, nargs="+", default=[3, 2, 4, 3, 6],
                        help="micro-batch counts of the successive probes")
    parser.add_argument("--repeats", type=positive_int, default=2, help="ABBA rounds")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from elastic_trainer import tf_environment  # noqa: F401  (first: TensorFlow's environment)
    import models
    from profiler import random_batch
    from schemes.probe import ImportanceProbe
    from train_step import make_optimizer

    model = models.build_model("mobilenetv2", 10, args.size, "none", "frozen")
    batch = random_batch(model, args.batch, 10)
    optimizer = make_optimizer("sgd", 1e-3, 5e-4, 10).optimizer

    def probe_seconds(exact_shapes: bool) -> float:
        probe = ImportanceProbe(model, optimizer)
        if exact_shapes:  # the batch-shaped function, traced per micro-batch size
            probe._chunk_gradients = probe._full_gradients
        start = time.perf_counter()
        for count in args.counts:
            probe.chunks = count
            probe.loss_change([batch])
        return time.perf_counter() - start

    times = {True: [], False: []}
    for round_ in range(args.repeats):
        for exact in ((True, False, False, True) if round_ % 2 == 0 else (False, True, True, False)):
            times[exact].append(probe_seconds(exact))
            print(f"round {round_ + 1}: {'exact shapes' if exact else 'free batch  '} {times[exact][-1]:6.2f} s",
                  flush=True)
    exact, free = statistics.median(times[True]), statistics.median(times[False])
    print(f"\nMobileNetV2 {args.size} px, batch {args.batch}, chunk counts {args.counts}: median over "
          f"{len(times[True])} probes-sequences: exact shapes {exact:.2f} s, free batch {free:.2f} s, "
          f"free / exact {free / exact:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
