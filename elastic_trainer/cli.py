"""The command line of main.py: its flags in groups, a run's recorded settings as their defaults
(--config, --resume), the rules between flags, and the TrainConfig they resolve to.

Every rule about a combination of flags is checked here, before anything is written; a scheme
declares and checks its own flags (Scheme.add_flags, Scheme.check_flags).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
from typing import Callable, Optional, Sequence

import data
import models
import selection_solver_DP as solver
from elastic_trainer import checkpoints, deadline, energy, profile_tables
from elastic_trainer.command_line import HelpFormatter, UserError, positive_int, str2bool
from elastic_trainer.config import TrainConfig
from elastic_trainer.files import ensure_writable_dir, read_json
from elastic_trainer.run_outputs import unique_run_name
from models import gradient_filter as filtering
from schemes import SCHEMES
from schemes.probe import PROBE_MODES
from train_step import OPTIMIZERS


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
    typed = typed_flags(argv)
    if record is not None and "val_fraction" in typed and "validation" not in typed:
        args.validation = "auto"  # a share typed beside a record chooses the split anew (0: none)
    if "time_budget" in typed or not args.time_budget:
        args.step_plan = ()  # a budget typed beside a record is planned anew, on this machine's clock
    args.step_plan = step_plan(args.step_plan)  # a record's plan arrives as a list (argparse types only text)
    return args


def typed_flags(argv: Optional[Sequence[str]]) -> set:
    """The destinations of the flags typed in `argv` (abbreviated or with `=` as argparse takes them)."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS  # what is not typed stays out of the namespace
    return set(vars(parser.parse_known_args(argv)[0]))


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
    """main.py's flags in groups; each scheme's own flags in a group of its own."""
    parser = argparse.ArgumentParser(
        description="Train a model on a dataset with one of ElasticTrainer's schemes. Every flag is "
                    "explained in README.md (Using it) and docs/design.md.",
        usage="%(prog)s [--model_name M] [--dataset_name D] [--train_type SCHEME] [--rho R] [flag ...]",
        formatter_class=HelpFormatter)
    model_and_data_flags(parser.add_argument_group("model and data").add_argument)
    optimizer_flags(parser.add_argument_group("optimizer and schedule").add_argument)
    budget_flags(parser.add_argument_group("budget (elastic schemes)").add_argument)
    probe_flags(parser.add_argument_group("importance probe (elastic schemes)").add_argument)
    output_flags(parser.add_argument_group("outputs, checkpoints and replays").add_argument)
    scheme_flags(parser)
    return parser


class Shown(tuple):
    """argparse choices that accept every name `accepts(name)` takes but list (in --help and in the
    error for a wrong one) only those of the tuple itself: the names a user picks from."""

    def __new__(cls, shown: Sequence[str], accepts: Callable[[str], bool]):
        self = super().__new__(cls, shown)
        self.accepts = accepts
        return self

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and self.accepts(name)


def model_and_data_flags(flag) -> None:
    flag("--model_name", default="resnet50", choices=list(models.MODELS), help="model to train")
    flag("--dataset_name", default="caltech_birds2011", choices=Shown(data.LISTED, data.accepted),
         help="dataset (embedded_* work offline; their source tasks and redrawn seeds: README, Models and datasets; "
              "few-shot draws of fashion_mnist: fashion_mnist_shot<N>_seed<S>, N images a class, disjoint seeds)")
    flag("--train_type", default="full_training", choices=list(SCHEMES), metavar="SCHEME",
         help=f"training scheme: {', '.join(SCHEMES)} (README, Which scheme at a budget?)")
    flag("--input_size", type=int, default=224, metavar="PX", help="input image side in pixels")
    flag("--batch_size", type=positive_int, default=4, metavar="N", help="training batch size")
    flag("--num_classes", type=positive_int, default=None, metavar="N", help="classifier size (default: the dataset's)")
    flag("--weights", default="imagenet", metavar="W", help="initial weights: imagenet, none or a .h5 saved by --save_model")
    flag("--head_init", default="glorot", choices=models.HEAD_INITS, help="a fresh classifier's initial weights (gain_stage_training refuses zeros)")
    flag("--bn_mode", default="frozen", choices=models.BN_MODES,
         help="backbone BatchNorm: frozen (inference statistics) or train (batch statistics)")
    flag("--gf_radius", "--gradient_filter", type=int, default=None, metavar="R",
         help=f"gradient filtering's patch size (gradient_filter_training: {filtering.DEFAULT_RADIUS}; 0: off)")
    flag("--gf_blocks", type=positive_int, default=filtering.DEFAULT_BLOCKS, metavar="N",
         help="with gradient filtering: the backbone's last blocks filtered")
    flag("--data_dir", default=None, metavar="DIR", help="TFDS data dir (default ~/tensorflow_datasets); image_folder's root")
    flag("--validation", choices=data.VALIDATION_MODES, default="auto",
         help="validation split: fresh (the dataset's own), carved (--val_fraction of train), none")
    flag("--val_fraction", type=float, default=data.DEFAULT_VAL_FRACTION, metavar="F",
         help="share of the training split carved out for validation (0: none)")
    flag("--seed", type=int, default=0, metavar="S", help="seed of weights, shuffling and augmentation")


def optimizer_flags(flag) -> None:
    flag("--optimizer", default="sgd", choices=OPTIMIZERS,
         help="sgd: SGDW, momentum 0.9, cosine-decayed; adam: for ViT")
    flag("--learning_rate", type=float, default=1e-4, metavar="LR", help="initial learning rate")
    flag("--weight_decay", type=float, default=5e-4, metavar="WD", help="decoupled weight decay factor (sgd)")
    flag("--num_epochs", type=positive_int, default=12, metavar="N",
         help="epochs to train (with --time_budget: the run makes the selections N epochs would)")
    flag("--time_budget", type=duration, default=0.0, metavar="T",
         help="train for T of wall time (90s, 5m, 1h; steps, selections, compiles) with the schedule ending "
              "there, instead of --num_epochs (docs/deadline.md)")
    flag("--step_plan", type=step_plan, default=(), help=argparse.SUPPRESS)  # a deadline's recorded plan (--config)


def budget_flags(flag) -> None:
    flag("--rho", type=float, default=0.533, metavar="R", help="training-step time as a fraction of a full step, (0, 1]")
    flag("--rho_mode", default="exact", choices=solver.RHO_MODES,
         help="exact: rho of the measured full step; paper: the original's FLOPs rule (its 50%% is --rho 0.533)")
    flag("--interval", type=float, default=4, metavar="EPOCHS", help="epochs between re-selections (fractions allowed)")
    flag("--profile", default=None, metavar="PATH",
         help="timing profile (default: profile_extracted/<model>_<input>_<classes>_<batch>_profile.json)")
    flag("--memory_budget_mb", type=float, default=0.0, metavar="MB",
         help=f"{listed(memory_budget_schemes())}: keep a step's allocator peak within MB (0: none)")


def probe_flags(flag) -> None:
    flag("--probe_batches", type=positive_int, default=1, metavar="N", help="batches averaged for each importance evaluation")
    flag("--probe_mode", default="auto", choices=PROBE_MODES,
         help="run the probe traced, eagerly, or whichever the profile says is cheaper")
    flag("--recalibrate", type=int, default=0, metavar="K",
         help="re-measure full and forward steps live every K selections (0: never)")


def output_flags(flag) -> None:
    flag("--run_name", default=None, metavar="NAME", help="name of the run's logs (default: model, dataset, scheme and its flags)")
    flag("--logdir", default="logs", metavar="DIR", help="TensorBoard logs go to <logdir>/<run_name>")
    flag("--save_model", type=str2bool, nargs="?", const=True, default=False, metavar="BOOL",
         help="save the best weights to saved_models/<run_name>.h5")
    flag("--save_txt", type=str2bool, nargs="?", const=True, default=False, metavar="BOOL", help="also write <logdir>/<run_name>.txt")
    flag("--test_every_epoch", type=str2bool, nargs="?", const=True, default=False, metavar="BOOL",
         help="evaluate the test set every epoch (the original's curve), not once at the end")
    flag("--eval_every", type=int, default=1, metavar="N",
         help="evaluate every Nth epoch's end and always the last (validation, which picks the best epoch, and the "
              "test set with --test_every_epoch); the epochs between have no validation accuracy")
    flag("--reference_steps", type=int, default=0, metavar="N",
         help="after training, time N full steps against N of the final selection (0: skip)")
    flag("--energy_meter", default="auto", choices=energy.METERS, help="the device's energy counter to read")
    flag("--checkpoint_every", type=int, default=0, metavar="N",
         help="also checkpoint every N steps (0: at epoch ends only)")
    flag("--checkpoint_seconds", type=float, default=60.0, metavar="S",
         help="an epoch end checkpoints when S seconds have passed since the last (0: every one)")
    flag("--resume", action="store_true", help="continue the run --run_name from its latest checkpoint")
    flag("--config", default=None, metavar="PATH",
         help="replay a run's config.json; flags given beside it win")


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


def duration(text: str) -> float:
    """--time_budget's value in seconds (0: none)."""
    if str(text).strip() in ("0", "0s", "none"):
        return 0.0
    try:
        return deadline.parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: seconds, or a number with a unit "
                                         f"(90s, 2.5m, 1h, 1h30m)") from None


def step_plan(text) -> tuple:
    """A recorded plan ([step, total] entries) from config.json or as JSON text."""
    entries = json.loads(text) if isinstance(text, str) else text
    if not isinstance(entries, (list, tuple)) or not all(
            isinstance(entry, (list, tuple)) and len(entry) == 2 and all(isinstance(n, int) and n >= 0 for n in entry)
            for entry in entries):
        raise argparse.ArgumentTypeError(f"a step plan is a list of [step, total steps] pairs, not {text!r}")
    return tuple(tuple(entry) for entry in entries)


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


def check_numbers(args: argparse.Namespace) -> None:
    """UserError for a flag's value outside its range."""
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
    if args.eval_every < 1:
        raise UserError(f"--eval_every must be a positive number of epochs (1: every epoch; the last is always "
                        f"evaluated), got {args.eval_every}")
    if args.checkpoint_every < 0:
        raise UserError("--checkpoint_every must be 0 (epoch ends only) or a number of steps")
    if not (args.checkpoint_seconds >= 0 and math.isfinite(args.checkpoint_seconds)):
        raise UserError(f"--checkpoint_seconds must be 0 (every epoch end) or a number of seconds, got "
                        f"{args.checkpoint_seconds}")


def check_memory_budget(args: argparse.Namespace) -> None:
    """A memory budget's rules: a positive number of MB, a scheme that selects under it, the exact
    time budget (paper mode has no memory side) and the traced probe (micro-batched, as measured)."""
    if not args.memory_budget_mb:
        return
    if not (args.memory_budget_mb > 0 and math.isfinite(args.memory_budget_mb)):
        raise UserError(f"--memory_budget_mb must be a positive number of MB (or 0: none), got {args.memory_budget_mb}")
    if not SCHEMES[args.train_type].accepts_memory_budget:
        raise UserError(f"--memory_budget_mb works with {listed(memory_budget_schemes())}, not "
                        f"{args.train_type} (its selection is fixed by its flags)")
    if args.rho_mode != "exact":
        raise UserError(MEMORY_NEEDS_EXACT)
    if args.probe_mode == "eager":
        raise UserError("--probe_mode eager does not go with --memory_budget_mb: a memory budget runs the probe "
                        "in micro-batches, traced (the memory model measured that pass); drop --probe_mode")


MEMORY_NEEDS_EXACT = ("--memory_budget_mb works with --rho_mode exact (paper mode keeps the original's time "
                      "budget, which has no memory side)")


def resolve_config(args: argparse.Namespace) -> TrainConfig:
    """Check the flags and fill in what depends on others; UserError for bad combinations."""
    check_numbers(args)
    check_memory_budget(args)
    own = scheme_options(args)  # first: it fills in the scheme's defaults (gradient filtering's radius)
    requested = requested_run_name(args)
    radius = args.gf_radius or 0
    if radius == 1 or radius < 0:
        raise UserError(f"--gf_radius must be 0 (off) or a patch size of at least 2 (the paper's: "
                        f"{', '.join(map(str, filtering.RADII))}), got {radius}")
    validation, val_fraction = data.resolve_validation(args.validation, args.val_fraction, args.dataset_name,
                                                       args.data_dir)
    models.check_input_size(args.model_name, args.input_size)
    num_classes = data.resolve_num_classes(args.dataset_name, args.num_classes, args.data_dir)
    gradient_filter = (radius, args.gf_blocks if radius else 0)
    profile = args.profile or os.path.join("profile_extracted", profile_tables.profile_name(
        args.model_name, args.input_size, num_classes, args.batch_size, args.bn_mode, gradient_filter) + ".json")
    if args.model_name == "vit" and args.optimizer == "sgd":
        logging.info("note: the paper trained ViT with --optimizer adam")
    if args.weights == "none" and args.bn_mode == "frozen":
        logging.warning("warning: --weights none with --bn_mode frozen keeps BatchNorm's initial statistics "
                        "(mean 0, variance 1) for the whole run, so a network trained from random weights "
                        "barely learns (about chance accuracy); train from scratch with --bn_mode train")
    ensure_writable_dir(args.logdir, "--logdir")
    run_name = requested if args.resume else unique_run_name(args.logdir, requested)
    if run_name != requested:
        logging.info("logs of run %s exist; this run is %s (pass --resume to continue that one)", requested, run_name)
    fields = {field.name for field in dataclasses.fields(TrainConfig)}
    resolved = dict(num_classes=num_classes, profile=profile, validation=validation, val_fraction=val_fraction,
                    run_name=run_name,
                    gf_radius=gradient_filter[0], gf_blocks=gradient_filter[1],
                    scheme_options={name: value for name, value in own.items() if name not in fields})
    schemes_own = scheme_flags(argparse.ArgumentParser())  # a scheme's flag sets its field only when given
    given = {name: value for name, value in vars(args).items()
             if name in fields and name not in resolved and (name not in schemes_own or own.get(name) is not None)}
    return TrainConfig(**given, **resolved)
