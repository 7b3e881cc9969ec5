"""Train a model with one of the paper's schemes, e.g. ElasticTrainer at half the step time:

    python main.py --model_name resnet50 --dataset_name caltech_birds2011 \
                   --train_type elastic_training --rho 0.5

Flags, names and defaults follow the original ElasticTrainer CLI.
"""
import time

PROCESS_START = time.perf_counter()  # the whole process's wall time counts from here (summary)

import tf_environment  # noqa: E402,F401  (first: prepares TensorFlow's environment before TensorFlow loads)
import argparse
import contextlib
import dataclasses
import logging
import math
import os
import re
import shlex
import sys
from typing import Optional, Sequence

import tensorflow as tf

import checkpoints
import data
import energy
import models
import profile_tables
import selection_solver_DP as solver
from config import TrainConfig
from models import gradient_filter as filtering
from run_outputs import RunOutputs, provenance, unique_run_name
from schemes import SCHEMES
from train import load_profile_for, train
from train_step import OPTIMIZERS, PROBE_MODES
from utils import (UserError, ensure_writable_dir, overhead_share, positive_int, read_json, run_cli,
                   str2bool)

OVERHEAD_HINT_SHARE = 0.15  # above this share of probes and compiles, the summary suggests a longer --interval


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The flags, over the defaults of a run's record when one is named: `--config PATH` (a
    run's config.json), or the run `--resume` continues (its own config.json, when it has one).
    Flags typed on the command line win over the record."""
    parser = build_parser()
    first, _ = parser.parse_known_args(argv)
    record = first.config
    if record is None and first.resume and first.run_name:
        saved = os.path.join(first.logdir, first.run_name, "config.json")
        record = saved if os.path.isfile(saved) else None
    if record is not None:
        parser.set_defaults(**recorded_defaults(read_json(record, "--config"), parser, record, first.resume))
    args = parser.parse_args(argv)
    typed = [argument.split("=", 1)[0] for argument in (sys.argv[1:] if argv is None else argv)]
    if record is not None and "--val_fraction" in typed and "--validation" not in typed:
        args.validation = "auto"  # a share typed beside a record chooses the split anew (0: none)
    return args


def recorded_defaults(saved: dict, parser: argparse.ArgumentParser, path: str, resuming: bool = False) -> dict:
    """A run's recorded configuration (config.json) as flag defaults: each value as the flag takes
    it (a filter that is off records 0 blocks, a scheme without a block range ""); UserError for a
    setting no flag sets."""
    if not isinstance(saved, dict):
        raise UserError(f"--config {path} is not a run's configuration (a JSON object of settings)")
    saved = checkpoints.with_later_flags(saved)  # settings older runs did not record, at the values they had
    # Worked out from the others, not chosen: worked out again (a replay with --batch_size 8 needs
    # another profile; a new run gets its own name), unless given.
    derived = profile_tables.profile_name(saved.get("model_name"), saved.get("input_size"), saved.get("num_classes"),
                                          saved.get("batch_size"), saved.get("bn_mode", "frozen"),
                                          (saved.get("gf_radius") or 0, saved.get("gf_blocks") or 0))
    if saved.get("profile") == os.path.join("profile_extracted", derived + ".json"):
        saved.pop("profile")
    saved.pop("num_classes", None)  # always the dataset's (another value is refused)
    if not resuming:
        saved.pop("run_name", None)
    if "train_type" in saved and saved["train_type"] not in SCHEMES:
        raise UserError(f"--config {path}: train_type {saved['train_type']!r} is no scheme here (a scheme file this "
                        f"checkout lacks?); the schemes: {', '.join(SCHEMES)}")
    saved.update(saved.pop("scheme_options", None) or {})  # a scheme's own flags, by name
    flags = {action.dest for action in parser._actions}
    fixed = {field.name: field.default for field in dataclasses.fields(TrainConfig) if field.name not in flags}
    defaults = {}
    for name, value in saved.items():
        if name in fixed:  # recorded, set by no flag (e.g. the DP's resolution): it must be the default
            if value != fixed[name]:
                raise UserError(f"--config {path}: {name} = {value!r} cannot be set from the command line "
                                f"(only {fixed[name]!r})")
            continue
        if name not in flags:
            raise UserError(f"--config {path}: unknown setting {name!r}; is it a run's config.json?")
        defaults[name] = value
    owners = scheme_flags(parser)
    for name in list(defaults):  # another scheme's flag, recorded at its field's default: not given
        if name in owners and owners[name][0] != defaults.get("train_type") and defaults[name] in ("", None):
            defaults[name] = None
    if not defaults.get("gf_radius"):  # off: the blocks it would filter are not recorded
        defaults.pop("gf_blocks", None)
        if "gf_radius" not in SCHEMES[defaults.get("train_type", "full_training")].flag_defaults:
            defaults["gf_radius"] = None
    return defaults


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Train a model on a dataset with one of ElasticTrainer's schemes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    flag = parser.add_argument
    flag("--model_name", default="resnet50", choices=list(models.MODELS), help="model to train")
    flag("--dataset_name", default="caltech_birds2011", choices=list(data.DATASETS),
         help="dataset; embedded_shapes works offline (see README)")
    flag("--train_type", default="full_training", choices=list(SCHEMES),
         help="training scheme: elastic_training is ElasticTrainer; the others the paper's "
              "baselines and ablations, TinyTL (bias only, lite residual), sparse update and "
              "gradient filtering, block_range_training, which trains one range of blocks, and "
              "gain_stage_training, which looks once at where the gain lives and trains from that "
              "stage up (docs/benchmarks/selector.md)")
    flag("--input_size", type=int, default=224, help="input image side in pixels")
    flag("--batch_size", type=positive_int, default=4, help="training batch size")
    flag("--num_classes", type=positive_int, default=None,
         help="classifier size (default: the dataset's; a different value is an error)")
    flag("--optimizer", default="sgd", choices=OPTIMIZERS,
         help="sgd: SGDW, momentum 0.9, cosine-decayed lr and weight decay; adam: for ViT")
    flag("--learning_rate", type=float, default=1e-4, help="initial learning rate")
    flag("--weight_decay", type=float, default=5e-4,
         help="decoupled weight decay factor (the decay is lr * weight_decay; sgd only)")
    flag("--num_epochs", type=positive_int, default=12, help="epochs to train")
    flag("--run_name", default=None,
         help="name of the run's logs (default: <model>_<dataset>_<train_type>[_rho<rho>][...], "
              "with the flags that set the scheme apart; a "
              "numeric suffix is added if logs of that name exist)")
    flag("--save_model", type=str2bool, nargs="?", const=True, default=False,
         help="save the best weights to saved_models/<run_name>.h5 (true/false)")
    flag("--save_txt", type=str2bool, nargs="?", const=True, default=False,
         help="write <logdir>/<run_name>.txt: training hours, best accuracy, step-time ratios")
    flag("--interval", type=float, default=4,
         help="elastic schemes: epochs between re-selections (fractions allowed, e.g. 0.5); each "
              "re-selection probes and may compile a new step, so keep selections a few hundred steps long")
    flag("--rho", type=float, default=0.533,
         help="elastic schemes: wanted training-step time as a fraction of a full step, (0, 1]")
    flag("--weights", default="imagenet",
         help="initial weights: imagenet (downloads once), none (random) or a .h5 path saved "
              "by this project (e.g. --save_model of a run on embedded_shapes_source)")
    flag("--head_init", default="glorot", choices=models.HEAD_INITS,
         help="how a fresh classifier starts: glorot (Keras's default, the original's) or zeros (the backbone "
              "gets no gradient until the head learns; keeps full training off a chance-level plateau, "
              "docs/benchmarks/fresh_validation.md)")
    flag("--data_dir", default=None,
         help="TFDS data dir (default ~/tensorflow_datasets); the root folder for image_folder")
    flag("--validation", choices=data.VALIDATION_MODES, default="auto",
         help="the validation split: each epoch is evaluated on it, and after the last epoch the test "
              "set is evaluated on the final weights and on the epoch of best validation accuracy's. "
              "fresh: the dataset's own, images in neither train nor test (the embedded targets render "
              "20 new ones a class; an image_folder may have ROOT/validation/<class>/); carved: "
              "--val_fraction of the training split; none: no validation; auto: fresh when the dataset "
              "has one, else carved (none when --val_fraction is 0)")
    flag("--val_fraction", type=float, default=data.DEFAULT_VAL_FRACTION,
         help="share of the training split held out as the carved validation split (the same examples "
              "for every seed); 0: no validation split, train on all of it")
    flag("--test_every_epoch", type=str2bool, nargs="?", const=True, default=False,
         help="also evaluate the test set after every epoch, as the original does, for its per-epoch "
              "test curve and its best-over-epochs accuracy (true/false). Off, the test set is "
              "evaluated once at the end, which keeps evaluation from costing as much as training")
    flag("--seed", type=int, default=0, help="seed of weights init, shuffling and augmentation")
    flag("--profile", default=None,
         help="timing profile for elastic schemes (default: profile_extracted/"
              "<model>_<input>_<classes>_<batch>_profile.json, made by profiler.py)")
    flag("--probe_batches", type=positive_int, default=1,
         help="elastic_training: batches averaged for each importance evaluation (paper: 1)")
    flag("--probe_mode", default="auto", choices=PROBE_MODES,
         help="elastic schemes and gain_stage_training: run the probe's gradient calls traced (a trace and "
              "compile once a process, then fast calls), eagerly (no trace, slower calls), or auto: whichever the "
              "profile's measured costs (probe_costs) say is cheaper for the calls this run makes; the summary "
              "says which and why")
    flag("--recalibrate", type=int, default=0, metavar="K",
         help="elastic schemes: every K selections, re-measure forward and full-step times "
              "live instead of trusting the profile forever (0: never)")
    flag("--bn_mode", default="frozen", choices=models.BN_MODES,
         help="BatchNorm of the backbone: frozen = inference mode, moving statistics used and "
              "kept (the original's; gammas/betas still train when selected); train = batch "
              "statistics (needed to train from scratch)")
    flag("--gf_radius", "--gradient_filter", type=int, default=None, metavar="R",
         help="gradient filtering (Yang et al., CVPR'23): average the output gradient of each "
              "convolution in the backbone's last --gf_blocks blocks over R x R patches and compute "
              "its gradients on the smaller map (the paper's R: 2, 4, 7). gradient_filter_training "
              f"trains those blocks so (default R {filtering.DEFAULT_RADIUS}); with elastic_training the "
              "filtered tensors get cheaper and the profile must be made with the same flags; "
              "0 or unset: off")
    flag("--gf_blocks", type=positive_int, default=filtering.DEFAULT_BLOCKS,
         help="with gradient filtering: how many of the backbone's last blocks are filtered (and, "
              "for gradient_filter_training, trained)")
    flag("--rho_mode", default="exact", choices=solver.RHO_MODES,
         help="elastic schemes: how rho becomes a backward budget. exact = rho*T_full - T_fp from "
              "the measured profile, so steps take rho of a full step; paper = the original's "
              "(rho - 1/3)*3/2 of the backward pass (its 2:1 FLOPs rule; its '50%%' runs used "
              "--rho 0.533)")
    flag("--reference_steps", type=int, default=0, metavar="N",
         help="after training, time N full steps against N steps of the final selection, "
              "interleaved, to report the step-time ratio under the run's own conditions "
              "(step_time_ratio_live; the study uses 20). It compiles a full step and costs a few "
              "seconds, which is why it is off by default; not counted in the training time")
    flag("--checkpoint_every", type=int, default=0, metavar="N",
         help="also write a checkpoint every N training steps (0: only at the end of each epoch, "
              "which always happens); checkpoints go to <logdir>/<run_name>/checkpoints/")
    flag("--checkpoint_seconds", type=float, default=60.0, metavar="S",
         help="an epoch end writes a checkpoint when S seconds have passed since the last one (0: at "
              "every epoch end). A checkpoint of MobileNetV2 takes ~0.15 s, which at every epoch of a "
              "short run adds up; a crash loses about S seconds of training and at most one epoch more. A signal "
              "(Ctrl-C, SIGTERM) always writes one")
    flag("--resume", action="store_true",
         help="continue the run named by --run_name (or the default name) in --logdir from its "
              "latest checkpoint; the other flags must be the ones it was started with")
    flag("--logdir", default="logs", help="TensorBoard logs go to <logdir>/<run_name>")
    flag("--config", default=None, metavar="PATH",
         help="replay a run: take every setting from its config.json (logs/<run_name>/config.json); "
              "flags given beside it win, e.g. --config logs/R/config.json --seed 1. A new run gets a new "
              "name; with --resume it continues that run. --resume --run_name R alone reads R's own")
    flag("--memory_budget_mb", type=float, default=0.0, metavar="MB",
         help=f"{listed(memory_budget_schemes())}: also keep the peak memory of a training step within "
              "MB, as TensorFlow's allocator counts it (weights, optimizer slots, data buffers, activations, "
              "gradients; the process's resident memory adds the runtime, see README), predicted by the "
              "profile's memory model; the importance probe runs in micro-batches that fit. A budget below a "
              "classifier-only step is refused with the smallest feasible one (0: no memory budget)")
    flag("--energy_meter", default="auto", choices=energy.METERS,
         help="energy per epoch and per step from the device's own counter (whole device, not this process): "
              "rapl (Linux powercap), ina3221 (Jetson power rails), nvml (NVIDIA GPUs); auto takes the first "
              "readable one and says once when there is none; none measures nothing")
    scheme_flags(parser)
    return parser


def scheme_flags(parser: argparse.ArgumentParser) -> dict:
    """Each scheme's own flags (Scheme.add_flags), in a group of its own: {flag dest: train_type}."""
    owners = getattr(parser, "scheme_flag_owners", None)
    if owners is not None:
        return owners
    owners = {}
    for name, scheme in SCHEMES.items():
        group = parser.add_argument_group(f"{name} only")
        before = len(parser._actions)
        scheme.add_flags(group.add_argument)
        for action in parser._actions[before:]:
            if action.default is not None:
                raise TypeError(f"{scheme.__qualname__}: flag {action.option_strings[0]} needs default None "
                                f"(meaning: not given), not {action.default!r}")
            owners[action.dest] = (name, " ".join(filter(None, [action.option_strings[0], action.metavar])))
    parser.scheme_flag_owners = owners
    return owners


def scheme_options(args: argparse.Namespace) -> dict:
    """Check the chosen scheme's own flags and fill in its defaults (Scheme.flag_defaults,
    Scheme.check_flags); refuse another scheme's flags. Returns the values of the scheme's own
    flags by name (UserError for a bad combination)."""
    scheme = SCHEMES[args.train_type]
    for name, value in scheme.flag_defaults.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    owners = scheme_flags(argparse.ArgumentParser())
    for dest, (owner, shown) in owners.items():
        if owner != args.train_type and getattr(args, dest, None) is not None:
            raise UserError(f"{shown} goes with --train_type {owner} (and that scheme only), not {args.train_type}")
    scheme.check_flags(args)
    return {dest: getattr(args, dest) for dest, (owner, _) in owners.items() if owner == args.train_type}


def listed(names) -> str:
    """'a', 'a and b', 'a, b and c'."""
    names = list(names)
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


def memory_budget_schemes() -> list:
    return sorted(name for name, scheme in SCHEMES.items() if scheme.accepts_memory_budget)


def requested_run_name(args: argparse.Namespace) -> str:
    """--run_name, or the default
    <model>_<dataset>_<train_type>[_rho<rho>[_paper]][_bntrain][_gf<r>x<blocks>][_blocks<first>-<stop>][_mem<MB>]
    (asked after scheme_options has filled in the scheme's defaults)."""
    if args.run_name:
        return args.run_name
    parts = [args.model_name, args.dataset_name, args.train_type]
    if SCHEMES[args.train_type].needs_profile:
        parts += [f"rho{args.rho:g}"] + (["paper"] if args.rho_mode == "paper" else [])
    if args.bn_mode == "train":
        parts.append("bntrain")
    if args.gf_radius:
        parts.append(f"gf{args.gf_radius}x{args.gf_blocks}")
    parts += SCHEMES[args.train_type].run_name_parts(args)
    if args.memory_budget_mb:
        parts.append(f"mem{args.memory_budget_mb:g}")
    return "_".join(parts)


def resolve_config(args: argparse.Namespace) -> TrainConfig:
    """Check the flags and fill in what depends on others; UserError for bad combinations."""
    if not 0 < args.rho <= 1:
        raise UserError(f"--rho must be in (0, 1] (a fraction of the full step time), got {args.rho}")
    if not (args.interval > 0 and math.isfinite(args.interval)):
        raise UserError(f"--interval must be a positive number of epochs, got {args.interval}")
    if args.learning_rate <= 0 or args.weight_decay < 0:
        raise UserError("--learning_rate must be > 0 and --weight_decay >= 0")
    if args.recalibrate < 0:
        raise UserError("--recalibrate must be 0 (never) or a number of selections")
    if args.reference_steps < 0:
        raise UserError("--reference_steps must be 0 (skip) or a number of steps")
    if args.checkpoint_every < 0:
        raise UserError("--checkpoint_every must be 0 (epoch ends only) or a number of steps")
    if not (args.checkpoint_seconds >= 0 and math.isfinite(args.checkpoint_seconds)):
        raise UserError(f"--checkpoint_seconds must be 0 (every epoch end) or a number of seconds, got "
                        f"{args.checkpoint_seconds}")
    if args.memory_budget_mb:
        if not (args.memory_budget_mb > 0 and math.isfinite(args.memory_budget_mb)):
            raise UserError(f"--memory_budget_mb must be a positive number of MB (or 0: none), got {args.memory_budget_mb}")
        if not SCHEMES[args.train_type].accepts_memory_budget:
            raise UserError(f"--memory_budget_mb works with {listed(memory_budget_schemes())}, not "
                            f"{args.train_type} (its selection is fixed by its flags)")
        if args.rho_mode != "exact":
            raise UserError("--memory_budget_mb works with --rho_mode exact (paper mode keeps the original's time "
                            "budget, which has no memory side)")
        if args.probe_mode == "eager":
            raise UserError("--probe_mode eager does not go with --memory_budget_mb: a memory budget runs the probe "
                            "in micro-batches, traced (the memory model measured that pass); drop --probe_mode")
    own = scheme_options(args)  # first: it fills in the scheme's defaults (gradient filtering's radius)
    radius = args.gf_radius or 0
    if radius == 1 or radius < 0:
        raise UserError(f"--gf_radius must be 0 (off) or a patch size of at least 2 (the paper's: "
                        f"{', '.join(map(str, filtering.RADII))}), got {radius}")
    gradient_filter = (radius, args.gf_blocks if radius else 0)
    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    own_fields = {name: value for name, value in own.items() if name in fields and value is not None}
    validation, val_fraction = data.resolve_validation(args.validation, args.val_fraction, args.dataset_name,
                                                       args.data_dir)
    models.check_input_size(args.model_name, args.input_size)
    num_classes = data.resolve_num_classes(args.dataset_name, args.num_classes, args.data_dir)
    run_name = requested_run_name(args)
    profile = args.profile or os.path.join("profile_extracted", profile_tables.profile_name(
        args.model_name, args.input_size, num_classes, args.batch_size, args.bn_mode, gradient_filter) + ".json")
    if args.model_name == "vit" and args.optimizer == "sgd":
        logging.info("note: the paper trained ViT with --optimizer adam")
    if args.weights == "none" and args.bn_mode == "frozen":
        logging.warning("warning: --weights none with --bn_mode frozen keeps BatchNorm's initial statistics "
                        "(mean 0, variance 1) for the whole run, so a network trained from random weights "
                        "barely learns (about chance accuracy); train from scratch with --bn_mode train")
    ensure_writable_dir(args.logdir, "--logdir")
    return TrainConfig(
        model_name=args.model_name, dataset_name=args.dataset_name, train_type=args.train_type,
        input_size=args.input_size, batch_size=args.batch_size, num_classes=num_classes,
        optimizer=args.optimizer, learning_rate=args.learning_rate, weight_decay=args.weight_decay,
        num_epochs=args.num_epochs, run_name=run_name if args.resume else unique_run_name(args.logdir, run_name),
        save_model=args.save_model, save_txt=args.save_txt, interval=args.interval, rho=args.rho,
        weights=args.weights, data_dir=args.data_dir, seed=args.seed, profile=profile,
        probe_batches=args.probe_batches, logdir=args.logdir, recalibrate=args.recalibrate,
        bn_mode=args.bn_mode, rho_mode=args.rho_mode, reference_steps=args.reference_steps,
        checkpoint_every=args.checkpoint_every, checkpoint_seconds=args.checkpoint_seconds,
        gf_radius=gradient_filter[0], gf_blocks=gradient_filter[1], validation=validation, val_fraction=val_fraction,
        energy_meter=args.energy_meter, memory_budget_mb=args.memory_budget_mb, test_every_epoch=args.test_every_epoch,
        probe_mode=args.probe_mode, head_init=args.head_init,
        scheme_options={name: value for name, value in own.items() if name not in fields}, **own_fields)


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


def report(summary: dict, txt_path: Optional[str]) -> None:
    """Print the run's summary."""
    achieved, target = summary["step_time_ratio_achieved"], summary["step_time_ratio_target"]
    speed = (f"step time {achieved:.3f} x the profiled full step ({1 / achieved:.2f}x faster)"
             if math.isfinite(achieved) else "step time vs profiled full step: n/a (no matching profile)")
    if math.isfinite(target) and math.isfinite(achieved):
        speed += f"; target {target:.3f} ({1 / target:.2f}x)"
    evaluation = [f"per-epoch evaluation took {summary['evaluation_seconds']:.1f} s more"]
    if summary.get("final_test_seconds") is not None:
        evaluation.append(f"the final test {summary['final_test_seconds']:.1f} s")
    evaluation = ", ".join(evaluation)
    lines = [f"Training type:        {summary['train_type']}",
             f"Final test accuracy:  {100 * summary['final_test_accuracy']:.2f} % (the last epoch's weights)",
             *([f"Selected epoch:       {summary['best_val_epoch']} (best validation accuracy "
                f"{100 * summary['best_val_accuracy']:.2f} %): test accuracy " +
                (f"{100 * summary['test_accuracy_at_best_val']:.2f} %"
                 if summary.get("test_accuracy_at_best_val") is not None else "n/a (its weights were not kept)")]
               if summary.get("best_val_epoch") else []),
             *([f"Best test accuracy:   {100 * summary['best_test_accuracy']:.2f} % (over epochs, as the paper reports)"]
               if summary.get("best_test_accuracy") is not None else []),
             f"Training wall time:   {summary['train_time_hours']:.4f} h "
             f"({summary['train_seconds']:.1f} s, evaluation excluded; {evaluation})",
             *([f"Whole process:        {summary['process_seconds']:.1f} s (start-up "
                f"{summary['startup_seconds']:.1f} s, checkpoints {summary['checkpoint_seconds']:.1f} s, "
                f"reference timing {summary.get('reference_seconds', 0.0):.1f} s included)"]
               if "process_seconds" in summary else []),
             f"Speed:                {speed}"]
    live = summary["step_time_ratio_live"]
    if "reference_full_step_ms" in summary and math.isfinite(live):
        lines.append(f"Measured live:        final selection {summary['reference_selection_step_ms']:.1f} ms "
                     f"= {live:.3f} x a full step ({summary['reference_full_step_ms']:.1f} ms), timed "
                     f"together after training ({1 / live:.2f}x faster)")
    train_seconds = summary["train_seconds"] or float("nan")
    overhead = [f"compiling steps {summary['compile_seconds']:.1f} s ({100 * summary['compile_share']:.1f} %)"]
    if summary["selection_seconds"]:
        seconds = summary["selection_seconds"]
        parts = summary.get("selection_parts", {})
        split = ", ".join(f"{name} {parts[part]:.2f} s" for part, name in
                          (("probe_trace", "the probe's first call"), ("probe_calls", "its gradient calls"),
                           ("probe", "its snapshots, update and copies"), ("anchor", "anchor"),
                           ("analysis", "contribution analysis"), ("dp", "DP"),
                           ("recalibrate", "recalibration")) if parts.get(part))
        overhead.append(f"selecting {sum(seconds):.1f} s ({100 * sum(seconds) / train_seconds:.1f} %, "
                        f"{len(seconds)} selections" + (f": {split})" if split else ")"))
        share = summary.get("overhead_share",  # summaries written before it was recorded
                            overhead_share(summary["compile_seconds"], seconds, train_seconds))
        overhead.append(f"together {100 * share:.1f} %")
    lines.append(f"Inside that time:     {'; '.join(overhead)}")
    if summary.get("probe"):
        lines.append(f"Probe:                {summary['probe']['mode']} ({summary['probe']['why']})")
    if summary["selection_seconds"] and share > OVERHEAD_HINT_SHARE:
        lines.append(f"Hint:                 {len(summary['selection_seconds'])} selections took "
                     f"{100 * share:.0f} % of the training time; each new one probes and compiles a "
                     f"step, so a longer --interval (or a longer run) makes that share smaller")
    if summary.get("memory_budget_mb"):
        lines.append(f"Memory budget:        {summary['memory_budget_mb']:g} MB; predicted step peak up to "
                     f"{summary['predicted_step_peak_mb']:.0f} MB, measured {summary['measured_step_peak_mb']:.0f} MB")
    peaks = [f"{name} {summary[key]:.0f} MB" for key, name in
             (("measured_step_peak_mb", "training steps"), ("measured_selection_peak_mb", "selections (probe, analysis)"),
              ("measured_evaluation_peak_mb", "evaluation")) if summary.get(key) is not None]
    if peaks:
        lines.append(f"Allocator peaks:      {', '.join(peaks)} (TensorFlow's tensors)")
    if "peak_memory_mb" in summary:
        lines.append(f"Peak memory:          {summary['peak_memory_mb']:.0f} MB resident (the whole process)")
    if txt_path:
        lines.append(f"Summary file:         {txt_path}")
    print("=" * 62, *lines, "=" * 62, sep="\n")


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
    args = parse_args(argv)
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    config = resolve_config(args)
    if args.resume:
        finished = check_resumable(config)
        if finished is not None:
            print(f"run {config.run_name} has already finished; nothing to resume")
            report(finished, None)
            return 0
    elif config.run_name != requested_run_name(args):
        logging.info("logs of run %s exist; this run is %s (pass --resume to continue that one)",
                     requested_run_name(args), config.run_name)
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
