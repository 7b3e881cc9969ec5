"""Train a model with one of the paper's schemes, e.g. ElasticTrainer at half the step time:

    python main.py --model_name resnet50 --dataset_name caltech_birds2011 \
                   --train_type elastic_training --rho 0.5

Flags, names and defaults follow the original ElasticTrainer CLI.
"""
import time

PROCESS_START = time.perf_counter()  # the whole process's wall time counts from here (summary)

import tf_environment  # noqa: E402,F401  (first: prepares TensorFlow's environment before TensorFlow loads)
import contextlib
import dataclasses
import logging
import os
import re
import shlex
import sys
from typing import Optional, Sequence

import tensorflow as tf

import checkpoints
import cli
import data
import energy
import models
from config import TrainConfig
from run_outputs import RunOutputs, provenance
from run_summary import report
from schemes import SCHEMES
from train import load_profile_for, train
from utils import UserError, read_json, run_cli

def check_resumable(config: TrainConfig) -> Optional[dict]:
    """UserError unless the run can be resumed with this configuration; its summary when it
    has already finished (nothing to resume)."""
    run_dir = os.path.join(config.logdir, config.run_name)
    if not os.path.isdir(run_dir):
        runs = sorted(name for name in os.listdir(config.logdir)
                      if os.path.isfile(os.path.join(config.logdir, name, "config.json")))
        listing = f"; runs there: {', '.join(runs[:12])}{' ...' if len(runs) > 12 else ''}" if runs else ""
        raise UserError(f"--resume: there is no run {config.run_name!r} in {config.logdir}{listing}. "
                        f"Name it with --run_name, or start a new run without --resume")
    saved = read_json(os.path.join(run_dir, "config.json"), "the run's configuration")
    differences = checkpoints.config_differences(saved, dataclasses.asdict(config))
    if differences:
        raise UserError(f"--resume: run {config.run_name!r} was started with other flags: "
                        f"{'; '.join(differences)}. Resume it with its own flags, or start a new run "
                        f"without --resume")
    if os.path.exists(os.path.join(run_dir, "summary.json")):
        unfinished = sorted(name for name in os.listdir(config.logdir)
                            if re.fullmatch(re.escape(config.run_name) + r"_\d+", name)
                            and checkpoints.has_checkpoint(os.path.join(config.logdir, name))
                            and not os.path.exists(os.path.join(config.logdir, name, "summary.json")))
        if unfinished:
            raise UserError(f"--resume: run {config.run_name!r} has finished, but {', '.join(unfinished)} "
                            f"did not: name the one to continue with --run_name")
        return read_json(os.path.join(run_dir, "summary.json"), "the run's summary")
    if not checkpoints.has_checkpoint(run_dir):
        raise UserError(f"--resume: run {config.run_name!r} has no checkpoint (it stopped before the end of "
                        f"its first epoch); start it again without --resume")
    return None


def resume_command(argv: Sequence[str], run_name: str) -> str:
    """The command that continues this run: the same flags, its run name, and --resume."""
    kept, skip = [], False
    for argument in argv:
        if skip:
            skip = False
        elif argument == "--run_name":
            skip = True
        elif argument != "--resume" and not argument.startswith("--run_name="):
            kept.append(argument)
    return " ".join(shlex.quote(part) for part in ["python", "main.py", *kept, "--run_name", run_name, "--resume"])


def peak_memory_mb() -> float:
    """Peak resident memory of this process so far (MB; this session's, when resumed)."""
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


class StartupClock:
    """Seconds of the start-up's parts (imports, model, profile, data), each from the last mark."""

    def __init__(self, start: float):
        self.last, self.parts = start, {}

    def mark(self, part: str) -> None:
        now = time.perf_counter()
        self.parts[part] = self.parts.get(part, 0.0) + now - self.last
        self.last = now


def main(argv: Optional[Sequence[str]] = None) -> int:
    # The whole process counts from its start when run as a command (imports included); called
    # from Python (tests, other tools) it counts from here.
    process_start = PROCESS_START if __name__ == "__main__" else time.perf_counter()
    startup = StartupClock(process_start)
    startup.mark("imports")
    args = cli.parse_args(argv)
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    config = cli.resolve_config(args)
    if args.resume:
        finished = check_resumable(config)
        if finished is not None:
            print(f"run {config.run_name} has already finished; nothing to resume")
            report(finished, None)
            return 0
    elif config.run_name != cli.requested_run_name(args):
        logging.info("logs of run %s exist; this run is %s (pass --resume to continue that one)",
                     cli.requested_run_name(args), config.run_name)
    tf.keras.utils.set_random_seed(config.seed)
    model = models.build_model(config.model_name, config.num_classes, config.input_size, config.weights,
                               config.bn_mode, config.gradient_filter, SCHEMES[config.train_type].lite_residual,
                               config.head_init)
    SCHEMES[config.train_type].check(model, config)
    origin = provenance(list(argv) if argv is not None else sys.argv[1:], config.weights)  # this session's start
    startup.mark("model")
    if SCHEMES[config.train_type].needs_profile:
        profile = load_profile_for(config, model)
    else:  # only to report the achieved step time relative to a full step
        try:
            profile = load_profile_for(config, model)
        except UserError:
            profile = None
    startup.mark("profile")
    train_data = data.load_epochs(config.dataset_name, config.batch_size, config.input_size, config.data_dir,
                                  seed=config.seed, val_fraction=config.val_fraction)
    test_data = data.load(config.dataset_name, "test", config.batch_size, config.input_size, config.data_dir)
    val_data = (data.load(config.dataset_name, data.VALIDATION, config.batch_size, config.input_size,
                          config.data_dir, val_fraction=config.val_fraction) if config.validation != "none" else None)
    steps_per_epoch = data.steps_per_epoch(config.dataset_name, config.batch_size, config.data_dir,
                                           config.val_fraction)
    if steps_per_epoch < 1:
        raise UserError(f"--batch_size {config.batch_size} exceeds the training split of {config.dataset_name}")
    validation_images = (data.split_examples(config.dataset_name, data.VALIDATION, config.data_dir, config.val_fraction)
                         if config.validation != "none" else None)
    SCHEMES[config.train_type].check_data(config, steps_per_epoch, validation_images)
    startup.mark("data")
    outputs = RunOutputs(config.logdir, config.run_name, config.model_name, config.num_classes, config.input_size)
    logging.info("run %s: logs in %s (tensorboard --logdir %s)", config.run_name, outputs.run_dir, config.logdir)
    command = resume_command(list(argv) if argv is not None else sys.argv[1:], config.run_name)
    meter = energy.open_meter(config.energy_meter, logging.info)
    try:
        summary = train(config, model, train_data, test_data, steps_per_epoch, outputs, profile,
                        resume=args.resume, resume_command=command, val_data=val_data, meter=meter,
                        process_start=process_start)
    except UserError:
        with contextlib.suppress(OSError):  # a refusal before training (e.g. a budget) leaves no empty run folder
            os.rmdir(outputs.run_dir)
        raise
    finally:
        if meter:
            meter.stop()
    summary["peak_memory_mb"] = peak_memory_mb()
    summary["config"] = dataclasses.asdict(config)
    summary["startup_parts"] = {**startup.parts, "loop": summary["loop_setup_seconds"]}  # this session's
    summary["provenance"] = origin
    report(summary, outputs.summary(summary, config.save_txt))
    checkpoints.discard(outputs.run_dir)
    outputs.discard_best_validation()
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
