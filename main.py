"""Train a model with one of the paper's schemes, e.g. ElasticTrainer at half the step time:

    python main.py --model_name resnet50 --dataset_name caltech_birds2011 \
                   --train_type elastic_training --rho 0.5

Flags, names and defaults follow the original ElasticTrainer CLI.
"""
import time

PROCESS_START = time.perf_counter()  # the whole process's wall time counts from here (summary)

from elastic_trainer import tf_environment  # noqa: E402,F401  (first: prepares TensorFlow's environment before TensorFlow loads)
import contextlib
import dataclasses
import logging
import os
import sys
from typing import Optional, Sequence

import tensorflow as tf

import data
import models
from elastic_trainer import checkpoints, energy, profile_tables
from elastic_trainer.cli import parse_args, resolve_config
from elastic_trainer.command_line import UserError, run_cli
from elastic_trainer.memory_stats import peak_memory_mb
from elastic_trainer.provenance import provenance
from elastic_trainer.run_control import StartupClock
from elastic_trainer.run_outputs import RunOutputs
from elastic_trainer.run_summary import report
from schemes import SCHEMES
from train import train


def main(argv: Optional[Sequence[str]] = None) -> int:
    # The whole process counts from its start when run as a command (imports included); called
    # from Python (tests, other tools) it counts from here.
    process_start = PROCESS_START if __name__ == "__main__" else time.perf_counter()
    startup = StartupClock(process_start)
    startup.mark("imports")
    typed = list(argv) if argv is not None else sys.argv[1:]
    args = parse_args(argv)
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    config = resolve_config(args)
    command = checkpoints.resume_command(typed, config.run_name)
    origin = provenance(typed, config.weights)  # this session's start
    if args.resume:
        finished = checkpoints.check_resumable(config)
        if finished is not None:
            print(f"run {config.run_name} has already finished; nothing to resume")
            report(finished, None)
            return 0
    tf.keras.utils.set_random_seed(config.seed)
    model = models.build_model(config.model_name, config.num_classes, config.input_size, config.weights,
                               config.bn_mode, config.gradient_filter, SCHEMES[config.train_type].lite_residual,
                               config.head_init)
    SCHEMES[config.train_type].check(model, config)
    startup.mark("model")
    profile = profile_tables.profile_for_run(config, model, required=SCHEMES[config.train_type].needs_profile)
    startup.mark("profile")
    run_data = data.for_run(config)
    SCHEMES[config.train_type].check_data(config, run_data.steps_per_epoch, run_data.validation_images)
    startup.mark("data")
    outputs = RunOutputs(config.logdir, config.run_name, config.model_name, config.num_classes, config.input_size)
    logging.info("run %s: logs in %s (tensorboard --logdir %s)", config.run_name, outputs.run_dir, config.logdir)
    meter = energy.open_meter(config.energy_meter, logging.info)
    try:
        summary = train(config, model, run_data.train, run_data.test, run_data.steps_per_epoch, outputs, profile,
                        resume=args.resume, resume_command=command, val_data=run_data.validation, meter=meter,
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
    if "deadline" in summary:  # the plan it followed: replaying the summary's config repeats its steps
        summary["config"]["step_plan"] = summary["deadline"]["plan"]
    summary["startup_parts"] = {**startup.parts, "loop": summary["loop_setup_seconds"]}  # this session's
    summary["provenance"] = origin
    text_path = outputs.summary(summary, config.save_txt)
    report(summary, text_path)
    checkpoints.discard(outputs.run_dir)
    outputs.discard_best_validation()
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
