"""Achieved step-time ratio of ElasticTrainer's selections against full training.

    python -m bench.step_ratio --model_name mobilenetv2 --input_size 96 --batch_size 32

For each rho, the selection ElasticTrainer makes (importance from a real probe batch, budget
from the profile, rho * T_full - T_fp) is timed against the full training step in one process,
in alternating blocks of consecutive steps (full, profiled, open, closed, full, ...), compared
by their 25th percentiles (on a shared machine, other work only adds time) and by medians:
- profiled: the first selection from the profile as saved (what training's first selection is
            by default);
- open:     the first selection after the controller re-fits the profile to live
            classifier-only, deepest-layer-only and full step times (as --recalibrate does);
- closed:   that, after --periods closed-loop corrections (the controller compares achieved
            with predicted step time after each period of --period_steps steps).
A benchmark: it prints, it asserts nothing.
"""
from __future__ import annotations

from elastic_trainer import tf_environment  # noqa: F401  (first: TensorFlow's environment before TensorFlow loads)
import argparse
import os
import sys
import time

from elastic_trainer.command_line import UserError, run_cli


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_name", default="mobilenetv2")
    parser.add_argument("--input_size", type=int, default=96)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--dataset_name", default="embedded_shapes", help="where probe batches come from")
    parser.add_argument("--data_dir", default=None)
    parser.add_argument("--weights", default="none", help="e.g. a backbone pre-trained on the source task")
    parser.add_argument("--bn_mode", default="frozen", choices=["frozen", "train"], help="BatchNorm mode")
    parser.add_argument("--rhos", type=float, nargs="+", default=[0.4, 0.5, 0.6, 0.8])
    parser.add_argument("--periods", type=int, default=3, help="closed-loop correction periods")
    parser.add_argument("--period_steps", type=int, default=12, help="steps per correction period")
    parser.add_argument("--rounds", type=int, default=20, help="timed steps per selection")
    parser.add_argument("--profile_dir", default="profile_extracted", help="where the fresh profile is written")
    parser.add_argument("--repeats", type=int, default=None, help="the profiler's --repeats (default: its own)")
    return parser.parse_args(argv)


def timed(function) -> float:
    """Wall time (ms) of one call."""
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000


def main(argv=None) -> int:
    args = parse_args(argv)
    import numpy as np

    import data
    import models
    import profiler
    import schemes
    import train_step
    from elastic_trainer import profile_tables
    from elastic_trainer.step_timing import typical_ms, wall_time_samples, wall_times_ms
    from train_step import make_optimizer

    num_classes = data.num_classes(args.dataset_name, args.data_dir)
    model = models.build_model(args.model_name, num_classes, args.input_size, args.weights, args.bn_mode)
    name = profile_tables.profile_name(args.model_name, args.input_size, num_classes, args.batch_size, args.bn_mode)
    path = os.path.join(args.profile_dir, name + ".json")
    profiler.main(["--model_name", args.model_name, "--input_size", str(args.input_size), "--num_classes",
                   str(num_classes), "--batch_size", str(args.batch_size), "--bn_mode", args.bn_mode, "--force",
                   "--output_dir", args.profile_dir] + (["--repeats", str(args.repeats)] if args.repeats else []))
    profile = profile_tables.load_profile(path)
    batches = iter(data.load(args.dataset_name, "train", args.batch_size, args.input_size, args.data_dir).repeat())
    batch = next(batches)
    setup = make_optimizer("sgd", 1e-3, 5e-4, 10_000)
    cache = train_step.StepCache(model, setup.optimizer, capacity=64)
    importance = schemes.normalized(schemes.ImportanceProbe(model, setup.optimizer).loss_change([batch]))
    owners = models.owner_layers(model)
    masks = [schemes.classifier_mask(model), np.array([o is owners[0] for o in owners], np.uint8),
             np.ones(len(owners), np.uint8)]  # classifier only, deepest layer only, full
    calibration = [cache.get(mask) for mask in masks]
    full = calibration[2]

    for _ in range(3):  # compile and warm up
        for step in calibration:
            step(*batch)[0].numpy()
    live = wall_times_ms([lambda s=s: s(*batch)[0].numpy() for s in calibration], args.rounds)
    print(f"{args.model_name} {args.input_size} px, batch {args.batch_size}: profiled head / path / full "
          f"{profile['T_head_ms']:.1f} / {profile['T_path_ms']:.1f} / {profile['T_full_ms']:.1f} ms per step; "
          f"live {live[0]:.1f} / {live[1]:.1f} / {live[2]:.1f} ms (25th percentiles)")
    print(f"{'rho':>5}{'profiled: tensors':>19}{'ratio':>8}{'open: tensors':>15}{'ratio':>8}{'closed: tensors':>17}"
          f"{'ratio':>8}{'predicted':>11}{'median open':>13}{'closed':>10}")
    for rho in args.rhos:
        try:
            controller = schemes.StepTimeController(profile, rho)
        except UserError as error:  # rho below what the forward pass alone costs
            print(f"{rho:>5.2f}  infeasible: {error}")
            continue
        profiled = controller.select(importance)
        controller.recalibrate(live, masks)
        opened = mask = controller.select(importance)
        for _ in range(args.periods):
            step = cache.get(mask)
            for _ in range(args.period_steps):
                images, labels = next(batches)
                controller.observe(timed(lambda: step(images, labels)[0].numpy()))
            controller.end_period(mask)
            mask = controller.select(importance)
        steps = [full, cache.get(profiled), cache.get(opened), cache.get(mask)]
        for step in steps[1:]:
            step(*batch)[0].numpy()
        samples = wall_time_samples([lambda step=step: step(*batch)[0].numpy() for step in steps], args.rounds)
        full_ms, profiled_ms, open_ms, closed_ms = (typical_ms(s) for s in samples)
        medians = [float(np.median(s)) for s in samples]
        print(f"{rho:>5.2f}{int(profiled.sum()):>19}{profiled_ms / full_ms:>8.3f}{int(opened.sum()):>15}"
              f"{open_ms / full_ms:>8.3f}{int(mask.sum()):>17}{closed_ms / full_ms:>8.3f}"
              f"{controller.predicted_ms(mask) / controller.T_full_ms:>11.3f}"
              f"{medians[2] / medians[0]:>13.3f}{medians[3] / medians[0]:>10.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
