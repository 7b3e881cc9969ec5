"""Does the live anchor read the machine's speed right? Its estimate of a full step against full
training's own in-loop steps, in one process, round after round.

    python -m bench.anchor [--rounds 6] [--steps 150] [--output FILE]

Builds the study protocol's MobileNetV2 (64 px, batch 32, frozen BatchNorm, the cached source
backbone when present) with the run's own pieces (train_step.StepCache, the importance probe). Each
round stands in for one period of a run:

1. "profile": full steps and the probe's full gradients timed warm, in alternating blocks, as the
   profiler times T_full_ms and T_grad_ms;
2. full training's in-loop steps (a tf.data pipeline, the loss read back and the logits' argmax
   taken each step, as train.py does): the truth the anchor should find;
3. a period of a selection's in-loop steps (the top 60 tensors), then the probe and the anchor
   exactly as ElasticTraining runs them at a later selection.

The anchor's estimate of today's full step is the profile's full step times its drift; the
ratio printed is that estimate over the in-loop full step (1.0: right). Variants, on the same
batch: the gradient and the step interleaved three times each; one untimed gradient call before
two timed ones; the fastest of the probe's two calls over the fastest of two step calls
(instead of each pair's 25th percentile); and, after a second probe, a candidate for training:
one untimed gradient call, then gradients and steps alternately, two each. Model and optimizer state are restored around
every timing. A benchmark: it prints, it asserts nothing; run it alone.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, List

from bench import publish_report
from elastic_trainer.command_line import positive_int
from experiments import study_plans

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rounds", type=positive_int, default=6, help="periods simulated (one reading each)")
    parser.add_argument("--steps", type=positive_int, default=150, help="in-loop steps of each period and of full training")
    parser.add_argument("--output", help="also write the report (markdown) to this file")
    return parser.parse_args(argv)


def ratios(row: Dict[str, float]) -> Dict[str, float]:
    """Each anchor's estimate of today's full step (profile's full step x its drift) over the
    in-loop full step. drift = gradient pass now x (period's step / that step timed now) / the
    profile's gradient pass, as ElasticTraining._drift computes it."""
    scale = row["loop_sel"] * row["profile_full"] / (row["profile_grad"] * row["loop_full"])
    return {"anchor": scale * row["anchor_grad"] / row["anchor_step"],
            "interleaved": scale * row["interleaved_grad"] / row["interleaved_step"],
            "warm_grad": scale * row["warm_grad"] / row["anchor_step"],
            "fastest": scale * min(row["probe_calls"]) / min(row["step_calls"]),
            "candidate": scale * row["candidate_grad"] / row["candidate_step"]}


def report(rows: List[Dict[str, float]]) -> str:
    import numpy as np

    lines = ["| round | profile full / grad ms | in-loop full ms | in-loop selection ms | probe's calls ms "
             "| anchor grad / step ms | anchor | interleaved | warm grad | fastest | candidate |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for index, row in enumerate(rows):
        r = ratios(row)
        lines.append(f"| {index + 1} | {row['profile_full']:.1f} / {row['profile_grad']:.1f} | {row['loop_full']:.1f} "
                     f"| {row['loop_sel']:.1f} | {', '.join(f'{c:.1f}' for c in row['probe_calls'])} "
                     f"| {row['anchor_grad']:.1f} / {row['anchor_step']:.1f} | {r['anchor']:.3f} "
                     f"| {r['interleaved']:.3f} | {r['warm_grad']:.3f} | {r['fastest']:.3f} "
                     f"| {r['candidate']:.3f} |")
    lines.append("")
    for name in ("anchor", "interleaved", "warm_grad", "fastest", "candidate"):
        values = np.array([ratios(row)[name] for row in rows])
        lines.append(f"{name}: estimate / in-loop full step {values.mean():.3f} ± {values.std(ddof=1) if len(values) > 1 else 0:.3f} "
                     f"(min {values.min():.3f}, max {values.max():.3f}, {len(values)} rounds)")
    return "\n".join(lines)


def random_batches(protocol: Dict):
    """Endless shuffled batches of ten batches' random images and labels, at the protocol's size."""
    import numpy as np
    import tensorflow as tf

    size, batch_size = protocol["input_size"], protocol["batch_size"]
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (10 * batch_size, size, size, 3)).astype(np.float32)
    labels = rng.integers(0, protocol["num_classes"], 10 * batch_size).astype(np.int64)
    return iter(tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(labels), seed=0)
                .batch(batch_size).repeat().prefetch(2))


def in_loop_ms(step, model, optimizer, batches, steps: int) -> float:
    """The typical time of `steps` in-loop calls of `step` (the loss read back and the logits'
    argmax taken, as train.py does), model and optimizer state restored."""
    import numpy as np

    from elastic_trainer.step_timing import typical_ms
    from train_step import preserved_state

    samples = []
    with preserved_state(model, optimizer):
        for _ in range(steps):
            x, y = next(batches)
            start = time.perf_counter()
            loss, logits = step(x, y)
            float(loss)
            samples.append((time.perf_counter() - start) * 1000)
            np.argmax(logits.numpy(), axis=-1)
    return typical_ms(samples)


def call(function, x, y):
    """A timed call's function: one call of `function` on (x, y), its first output read back."""
    return lambda: function(x, y)[0].numpy()


def main(argv=None) -> int:
    args = parse_args(argv)
    import numpy as np
    import tensorflow as tf

    from elastic_trainer.step_timing import typical_ms, wall_time_samples
    from schemes.probe import ImportanceProbe
    from train_step import StepCache
    from train_step import make_optimizer, preserved_state

    model, protocol = study_plans.protocol_model("mobilenetv2")
    backbone = os.path.isfile(os.path.join(ROOT, protocol["weights"]))
    setup = make_optimizer("sgd", protocol["learning_rate"], 1e-4, 10000)
    optimizer = setup.optimizer
    optimizer._create_all_weights(model.trainable_weights)
    steps = StepCache(model, optimizer)
    probe = ImportanceProbe(model, optimizer, steps.forward)
    count = len(model.trainable_weights)
    selection = np.zeros(count, np.uint8)
    selection[-60:] = 1
    full, current = steps.get(np.ones(count, np.uint8)), steps.get(selection)
    size, batch_size = protocol["input_size"], protocol["batch_size"]
    batches = random_batches(protocol)
    fixed = next(batches)

    def in_loop(step) -> float:
        return in_loop_ms(step, model, optimizer, batches, args.steps)

    print(f"MobileNetV2 {size} px, batch {batch_size}, {'source backbone' if backbone else 'random weights'}; "
          f"{args.rounds} rounds of {args.steps} in-loop steps", flush=True)
    with preserved_state(model, optimizer):  # compile everything once
        for function in (full, current):
            function(*fixed)[0].numpy()
        probe.loss_change([fixed])
    rows = []
    for _ in range(args.rounds):
        with preserved_state(model, optimizer):
            profile_full, profile_grad = (typical_ms(s) for s in wall_time_samples(
                [call(full, *fixed), call(probe._full_gradients, *fixed)], 10, block=5))
        loop_full, loop_sel = in_loop(full), in_loop(current)
        probe.loss_change([next(batches)])
        calls = list(probe.calls_ms)
        anchor_grad, anchor_step = probe.gradients_ms(current)
        x, y = probe.last_batch
        with preserved_state(model, optimizer):  # the anchor's two step calls again, raw
            step_calls = wall_time_samples([call(current, x, y)], 2, block=1)[0]
        probe.loss_change([(x, y)])  # probe again: the candidate also runs right after a probe
        probe.calls_ms = []
        with preserved_state(model, optimizer):  # candidate: one untimed gradient call, then two of each, alternately
            probe._full_gradients(x, y)[0].numpy()
            candidate_grad, candidate_step = (typical_ms(s) for s in wall_time_samples(
                [call(probe._full_gradients, x, y), call(current, x, y)], 2, block=1))
        with preserved_state(model, optimizer):
            interleaved_grad, interleaved_step = (typical_ms(s) for s in wall_time_samples(
                [call(probe._full_gradients, x, y), call(current, x, y)], 3, block=1))
            probe._full_gradients(x, y)[0].numpy()  # untimed
            warm_grad = typical_ms(wall_time_samples([call(probe._full_gradients, x, y)], 2, block=2)[0])
        rows.append(dict(profile_full=profile_full, profile_grad=profile_grad, loop_full=loop_full, loop_sel=loop_sel,
                         probe_calls=calls, anchor_grad=anchor_grad, anchor_step=anchor_step, step_calls=step_calls,
                         candidate_grad=candidate_grad, candidate_step=candidate_step,
                         interleaved_grad=interleaved_grad, interleaved_step=interleaved_step, warm_grad=warm_grad))
        print(f"round {len(rows)}: anchor {ratios(rows[-1])['anchor']:.3f}", flush=True)
    publish_report(report(rows), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
