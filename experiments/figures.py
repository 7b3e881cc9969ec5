"""The paper's figures, each one command: the same experiments, datasets, schemes, rho values and
run names as the original artifact's run_figure*.sh, with this project's CLI.

    python scripts/figures.py run 15            # Fig. 15 (a)-(f): ResNet50 on CUB-200, Pets, Dogs
    python scripts/figures.py run 17ac --ego    # ElasticTrainer's runs only (the *_ego scripts)
    python scripts/figures.py run 17ac --proxy  # the same experiment on the offline embedded task
    python scripts/figures.py run 19 --dry_run  # check every run's flags, print the plan, train nothing
    python scripts/figures.py table --proxy     # the claims table of the finished proxy runs
    python scripts/figures.py list

Each run profiles first (profiles are reused while valid), says how long the whole figure will
take before it starts, skips runs whose summary exists (an interrupted figure resumes where it
stopped) and ends by drawing its figures into figures/. Runs live in logs/figures/<setting>/:
a run name means one experiment in every figure of a setting, so figures share runs.

Settings: `paper` is the original's (ImageNet weights, 224 px, batch 4, SGDW lr 1e-4, 12 epochs,
re-selection every 4, frozen BatchNorm, the original's rho semantics); it needs the TFDS datasets
and ImageNet weights (a network once). `proxy` runs each experiment on the embedded dataset with
the calibrated study protocol (experiments/study_plans.py) and fewer epochs, offline, in minutes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from elastic_trainer.command_line import HelpFormatter, UserError, run_cli
from elastic_trainer.files import atomic_write_text
from experiments import sharding
from experiments.runner import add_distribution_flags, check_main_arguments, distribution, train_all
from experiments.study_plans import PROTOCOLS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# rho as the original passes it for its "35 %" ... "70 %" runs, and the suffix of their run names
RHOS_17 = ((0.367, "035"), (0.4, "040"), (0.533, "050"), (0.6, "060"), (0.7, "070"))
SCHEME_TAGS = {"elastic_training": "ElasticTrainer", "full_training": "Full_training",
               "traditional_tl_training": "Traditional_TL", "bn_plus_bias_training": "BN+Bias",
               "prune_training": "PruneTrain"}
DATASET_TAGS = {"caltech_birds2011": "CUB200", "oxford_iiit_pet": "PET37", "stanford_dogs": "DOG120",
                "embedded_shapes": "SHAPES64"}
# Split sizes (train, test) for estimates before a dataset is downloaded (TFDS catalog).
SPLIT_SIZES = {"caltech_birds2011": (5994, 5794), "oxford_iiit_pet": (3680, 3669),
               "stanford_dogs": (12000, 8580)}
EMBEDDED_SPLIT_SIZES = (2560, 1920)  # about the embedded tasks' (train, test): for the shards' balance only
PROXY_EPOCHS, PROXY_INTERVAL = 4, 1  # the offline study's short runs (a selection every epoch)
PROXY_MODEL = "mobilenetv2"  # stands in for ResNet50 in the single-model figures offline
PROXY_MODELS = (PROXY_MODEL,)  # the offline study's models: a 4-epoch run of each takes minutes
RUN_OVERHEAD_S = 40.0  # start-up, data, compiles and the final reference timing of one run


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One training run of a figure, in the paper's terms (the setting fills in the rest)."""

    run_name: str
    model_name: str
    dataset_name: str
    train_type: str
    rho: Optional[float] = None
    num_epochs: Optional[int] = None  # None: the setting's
    optimizer: Optional[str] = None

    @property
    def elastic(self) -> bool:
        return self.train_type == "elastic_training"


@dataclasses.dataclass(frozen=True)
class Plot:
    kind: str  # curves | bars | heatmap
    output: str  # file name under figures/, without extension
    runs: Tuple[str, ...]
    tag: str = "test/accuracy"
    title: str = ""


@dataclasses.dataclass(frozen=True)
class Figure:
    description: str
    experiments: Tuple[Experiment, ...]
    plots: Tuple[Plot, ...]


def _schemes(prefix: str, model: str, dataset: str, rho: float, baselines: Sequence[str],
             elastic_name: Optional[str] = None, **overrides) -> List[Experiment]:
    elastic = Experiment(elastic_name or f"{prefix}_ElasticTrainer", model, dataset, "elastic_training", rho)
    return [elastic] + [Experiment(f"{prefix}_{SCHEME_TAGS[scheme]}", model, dataset, scheme,
                                   **overrides.get(scheme, {})) for scheme in baselines]


CURVE_BASELINES = ("full_training", "traditional_tl_training", "bn_plus_bias_training")


def _curves_figure(number: str, datasets: Sequence[Tuple[str, str, str]], description: str) -> Figure:
    """Test accuracy (top row of the paper's figure) and training loss (bottom row) against wall
    time, one pair of panels per dataset; plus the selection heat map of each elastic run."""
    experiments, plots = [], []
    for dataset, accuracy_letter, loss_letter in datasets:
        tag = DATASET_TAGS[dataset]
        runs = _schemes(tag, "resnet50", dataset, 0.533, CURVE_BASELINES)
        experiments += runs
        names = tuple(run.run_name for run in runs)
        plots += [Plot("curves", f"figure{number}_{accuracy_letter}", names, "test/accuracy",
                       f"Fig. {number}({accuracy_letter}): ResNet50 on {dataset}"),
                  Plot("curves", f"figure{number}_{loss_letter}", names, "train/classification_loss",
                       f"Fig. {number}({loss_letter}): ResNet50 on {dataset}"),
                  Plot("heatmap", f"figure{number}_selection_{tag}", (names[0],), "",
                       f"ResNet50 on {dataset}: tensors ElasticTrainer trains over time")]
    return Figure(description, tuple(experiments), tuple(plots))


def _figure17() -> Figure:
    dataset = "caltech_birds2011"
    elastic = [Experiment(f"CUB200_ElasticTrainer_{suffix}", "resnet50", dataset, "elastic_training", rho)
               for rho, suffix in RHOS_17]
    baselines = [Experiment(f"CUB200_{SCHEME_TAGS[scheme]}", "resnet50", dataset, scheme)
                 for scheme in CURVE_BASELINES + ("prune_training",)]
    runs = elastic + baselines
    return Figure("ResNet50 on CUB-200: ElasticTrainer at five rho values against the baselines, "
                  "bars of wall time and accuracy", tuple(runs),
                  (Plot("bars", "figure17_ac", tuple(run.run_name for run in runs), "",
                        "Fig. 17(a)(c): ResNet50 on CUB-200"),))


FIG19_MODELS = ("resnet50", "vgg16", "mobilenetv2", "vit")


def _figure19() -> Figure:
    experiments = []
    for model in FIG19_MODELS:
        overrides = {}
        if model == "mobilenetv2":  # the original trains MobileNetV2 fully for twice the epochs
            overrides["full_training"] = {"num_epochs": 24}
        optimizer = "adam" if model == "vit" else None  # the paper trained ViT with Adam
        runs = _schemes(model, model, "caltech_birds2011", 0.4, CURVE_BASELINES, **overrides)
        experiments += [dataclasses.replace(run, optimizer=optimizer) for run in runs]
    return Figure("ResNet50, VGG16, MobileNetV2 and ViT (Adam) on CUB-200 at rho 0.4 against the "
                  "baselines, bars of wall time and accuracy", tuple(experiments),
                  (Plot("bars", "figure19", tuple(run.run_name for run in experiments), "",
                        "Fig. 19: four models on CUB-200, ElasticTrainer at rho 0.4"),))


_ALL_DATASETS = (("caltech_birds2011", "a", "d"), ("oxford_iiit_pet", "b", "e"), ("stanford_dogs", "c", "f"))
FIGURES: Dict[str, Figure] = {
    "15": _curves_figure("15", _ALL_DATASETS, "ResNet50 on CUB-200, Oxford-IIIT Pet and Stanford Dogs: "
                                              "accuracy and training loss against wall time"),
    "15ad": _curves_figure("15", _ALL_DATASETS[:1], "Fig. 15 (a)(d) only: ResNet50 on CUB-200"),
    "16": _curves_figure("16", (("caltech_birds2011", "a", "c"), ("oxford_iiit_pet", "b", "d")),
                         "Fig. 15's experiment in the Raspberry Pi setting (run it on the Pi): "
                         "CUB-200 and Oxford-IIIT Pet"),
    "17ac": _figure17(),
    "19": _figure19(),
}


@dataclasses.dataclass(frozen=True)
class Setting:
    """How a figure's experiments become main.py flags.

    proxy: every experiment on the embedded dataset with its model's calibrated study protocol,
    PROXY_EPOCHS epochs for every scheme; runs are named by configuration
    (<model>_<train_type>[_rho<rho>]), so figures that share a configuration share its run.
    """

    name: str
    logdir: str
    output_prefix: str

    def dataset(self, experiment: Experiment) -> str:
        return "embedded_shapes" if self.name == "proxy" else experiment.dataset_name

    def run_name(self, experiment: Experiment) -> str:
        if self.name != "proxy":
            return experiment.run_name
        return "_".join([experiment.model_name, experiment.train_type]
                        + ([f"rho{experiment.rho:g}"] if experiment.rho is not None else []))

    def options(self, experiment: Experiment) -> Dict[str, str]:
        """main.py's options for an experiment, by flag name (without the dashes)."""
        if self.name == "proxy":
            protocol = PROTOCOLS[experiment.model_name]
            schedule = dict(input_size=protocol["input_size"], batch_size=protocol["batch_size"],
                            learning_rate=protocol["learning_rate"], num_epochs=PROXY_EPOCHS,
                            interval=PROXY_INTERVAL, weights=protocol["weights"], bn_mode=protocol["bn_mode"])
        else:
            schedule = dict(input_size=224, batch_size=4, learning_rate="1e-4",
                            num_epochs=experiment.num_epochs or 12, interval=4, weights="imagenet",
                            bn_mode="frozen")
        options = dict(model_name=experiment.model_name, dataset_name=self.dataset(experiment),
                       train_type=experiment.train_type, **schedule)
        if experiment.rho is not None:
            options.update(rho=f"{experiment.rho:g}", rho_mode="paper")
        if experiment.optimizer:
            options["optimizer"] = experiment.optimizer
        # the paper's figures show per-epoch test curves and the best test accuracy over epochs; validation
        # on a tenth of the training split, as these runs always did (an embedded target's own split is newer)
        options.update(seed=0, save_txt="true", test_every_epoch="true", validation="carved", logdir=self.logdir,
                       run_name=self.run_name(experiment))
        return {name: str(value) for name, value in options.items()}

    def flags(self, experiment: Experiment) -> List[str]:
        return [part for name, value in self.options(experiment).items() for part in (f"--{name}", value)]


def setting(proxy: bool, logdir: Optional[str], device: str = "") -> Setting:
    """A setting's runs live in logs/figures/<setting>[_<device>] unless `logdir` says otherwise;
    figures get the same prefix (proxy_, <device>_)."""
    name = "proxy" if proxy else "paper"
    suffix = f"_{device}" if device else ""
    prefix = ("proxy_" if proxy else "") + (f"{device}_" if device else "")
    return Setting(name, logdir or os.path.join("logs", "figures", name + suffix), prefix)


def proxy_ready(model: str) -> bool:
    """A model runs in the offline study: it has a study protocol and is quick enough (its source
    backbone is checked before training, see `preflight`)."""
    return model in PROXY_MODELS and model in PROTOCOLS


def selected(figure: Figure, ego: bool, config: Setting) -> Tuple[List[Experiment], List[Plot], List[str]]:
    """The experiments and plots of a figure in a setting (the ego variant keeps ElasticTrainer's
    runs only); notes on what the setting changes or leaves out."""
    notes = []
    experiments = [e for e in figure.experiments if e.elastic or not ego]
    renamed: Dict[str, str] = {}  # the figure's run name -> the setting's
    if config.name == "proxy":
        models = sorted({e.model_name for e in experiments})
        if len(models) == 1 and not proxy_ready(models[0]):
            notes.append(f"{PROXY_MODEL} stands in for {models[0]} offline, on embedded_shapes")
            experiments = [dataclasses.replace(e, model_name=PROXY_MODEL) for e in experiments]
        for model in sorted({e.model_name for e in experiments if not proxy_ready(e.model_name)}):
            notes.append(f"{model} left out: the offline study runs {', '.join(PROXY_MODELS)} only"
                         + (f" (its headline study: python scripts/study.py run claims --model_name {model})"
                            if model in PROTOCOLS else ""))
        experiments = [e for e in experiments if proxy_ready(e.model_name)]
        if any(e.num_epochs for e in experiments):
            notes.append(f"every proxy run trains {PROXY_EPOCHS} epochs (the original gives MobileNetV2's "
                         f"full training twice the epochs on CUB-200)")
    unique: Dict[str, Experiment] = {}
    for experiment in experiments:  # proxy: the three datasets become one; keep the first
        renamed[experiment.run_name] = config.run_name(experiment)
        unique.setdefault(config.run_name(experiment), experiment)
    plots, seen = [], set()
    for plot in figure.plots:
        runs = tuple(dict.fromkeys(renamed[name] for name in plot.runs if name in renamed))
        key = (plot.kind, runs, plot.tag)
        if not runs or key in seen:
            continue
        seen.add(key)
        title = plot.title
        if config.name == "proxy":
            title = f"proxy of {title.split(':')[0]}: {unique[runs[0]].model_name} on embedded_shapes"
        output = plot.output
        if config.name == "proxy":
            for tag in DATASET_TAGS.values():
                output = output.replace(tag, DATASET_TAGS["embedded_shapes"])
        plots.append(dataclasses.replace(plot, runs=runs, title=title,
                                         output=config.output_prefix + output + ("_ego" if ego else "")))
    return list(unique.values()), plots, notes


def num_classes(dataset: str) -> int:
    import data
    return data.num_classes(dataset)


def profile_path(model: str, input_size: int, classes: int, batch: int) -> str:
    from elastic_trainer import profile_tables
    return os.path.join(ROOT, "profile_extracted",
                        profile_tables.profile_name(model, input_size, classes, batch, "frozen") + ".json")


def estimate_seconds(options: Dict[str, str], profile: Dict, split_sizes: Tuple[int, int]) -> float:
    """A run's seconds from the profile: its steps at its expected step time, an evaluation per
    epoch (forward passes) and a fixed start-up and compile allowance."""
    import selection_solver_DP as solver

    fp, bp, full = profile["T_fp_ms"], profile["T_bp_ms"], profile["T_full_ms"]
    scheme, batch, epochs = options["train_type"], int(options["batch_size"]), int(options["num_epochs"])
    if scheme in ("elastic_training", "static_top_training"):
        fraction = min(1.0, max(0.0, solver.paper_backward_fraction(float(options["rho"]))))
        step = fp + fraction * bp
    elif scheme == "traditional_tl_training":
        step = profile.get("T_head_ms", fp)
    elif scheme in ("bn_plus_bias_training", "tinytl_bias_training"):  # the error gradient all the way down
        step = fp + sum(tensor["t_dy_ms"] for tensor in profile["tensors"])
    else:
        step = full
    train_steps, test_steps = split_sizes[0] // batch, -(-split_sizes[1] // batch)
    return epochs * (train_steps * step + test_steps * fp) / 1000 + RUN_OVERHEAD_S


def split_sizes(dataset: str) -> Tuple[int, int]:
    if dataset in SPLIT_SIZES:
        return SPLIT_SIZES[dataset]
    import data
    info = data.prepare(dataset).info
    return info.splits["train"].num_examples, info.splits["test"].num_examples


def preflight(experiments: Sequence[Experiment], config: Setting) -> Optional[str]:
    """None, or one line naming the datasets and weights these runs cannot reach here and what
    to do (checked in seconds, before any long work)."""
    import data
    import models

    datasets = [d for d in sorted({config.dataset(e) for e in experiments}) if data.availability_problem(d)]
    models_needed = sorted({e.model_name for e in experiments})
    if config.name == "proxy":
        missing = [PROTOCOLS[m]["weights"] for m in models_needed
                   if not os.path.exists(os.path.join(ROOT, PROTOCOLS[m]["weights"]))]
        if missing:
            return (f"no source backbone {', '.join(missing)}: make it once with bash "
                    f"scripts/make_source_backbone.sh MODEL 64")
        return None
    weights = [m for m in models_needed if weights_unreachable(models.keras_cache_dir(), m)]
    if not datasets and not weights:
        return None
    parts = ([f"the datasets {', '.join(datasets)} (not prepared, download hosts unreachable)"] if datasets else []) \
        + ([f"the ImageNet weights of {', '.join(weights)} (not cached, host unreachable)"] if weights else [])
    return (f"this machine cannot reach {' nor '.join(parts)}: run once where there is a network, or copy "
            f"~/tensorflow_datasets and ~/.keras from such a machine; offline, run bash "
            f"scripts/run_proxy_study.sh (the same figures on the embedded dataset)")


# Each backbone's downloaded ImageNet weights (a glob under the Keras cache) and their host.
IMAGENET_WEIGHTS = {"resnet50": ("models/resnet50_weights_*notop.h5", "storage.googleapis.com"),
                    "vgg16": ("models/vgg16_weights_*notop.h5", "storage.googleapis.com"),
                    "mobilenetv2": ("models/mobilenet_v2_weights_*no_top.h5", "storage.googleapis.com"),
                    "vit": ("weights/ViT-B_16_imagenet21k+imagenet2012.npz", "github.com")}


def weights_unreachable(cache: str, model_name: str) -> bool:
    """Whether the model's ImageNet weights are neither in the Keras `cache` nor downloadable now."""
    import glob
    import socket

    files, host = IMAGENET_WEIGHTS[model_name]
    if glob.glob(os.path.join(cache, files)):
        return False
    try:
        socket.create_connection((host, 443), timeout=5).close()
        return False
    except OSError:
        return True


def profile_key(options: Dict[str, str]) -> Tuple[str, int, int, int]:
    """(model, input, classes, batch): what a timing profile is measured for."""
    return (options["model_name"], int(options["input_size"]), num_classes(options["dataset_name"]),
            int(options["batch_size"]))


def profiler_flags(options: Dict[str, str]) -> List[str]:
    """profiler.py's flags for the profile a run's options need."""
    key = profile_key(options)
    return (["--model_name", key[0], "--input_size", str(key[1]), "--num_classes", str(key[2]), "--batch_size",
             str(key[3]), "--bn_mode", "frozen"] + (["--optimizer", options["optimizer"]] if "optimizer" in options else []))


def profile_runs(runs: Sequence[Dict[str, str]], dry_run: bool) -> Dict[Tuple, Dict]:
    """Profile each (model, input, classes, batch) of these runs' options once (profiler.py
    reuses a valid profile)."""
    profiles = {}
    for options in runs:
        key = profile_key(options)
        if key in profiles:
            continue
        command = [sys.executable, os.path.join(ROOT, "profiler.py"), *profiler_flags(options)]
        print("profile: python " + " ".join(os.path.relpath(part, ROOT) if part.startswith(ROOT) else part
                                            for part in command[1:]), flush=True)
        if dry_run:  # the estimate still uses a profile measured earlier, if there is one
            path = profile_path(*key)
            profiles[key] = json.load(open(path)) if os.path.exists(path) else None
            continue
        if subprocess.run(command, cwd=ROOT).returncode != 0:
            raise UserError(f"profiling {key[0]} failed (its message is above)")
        with open(profile_path(*key)) as handle:
            profiles[key] = json.load(handle)
    return profiles


def draw(plots: Sequence[Plot], config: Setting) -> List[str]:
    """Draw every plot whose runs have all finished; the paths written."""
    from experiments import plot as plotting

    written = []
    for spec in plots:
        run_dirs = [os.path.join(ROOT, config.logdir, name) for name in spec.runs]
        if not all(os.path.exists(os.path.join(path, "summary.json")) for path in run_dirs):
            continue
        output = os.path.join(ROOT, "figures", spec.output + ".png")
        if spec.kind == "curves":
            written += plotting.plot_curves([plotting.Run(path) for path in run_dirs], [spec.tag], "time",
                                            spec.title, output)
        elif spec.kind == "bars":
            written += plotting.plot_bars(plotting.bar_rows(plotting.load_summaries(run_dirs)), spec.title, output)
        else:
            written += plotting.plot_heatmap(plotting.Run(run_dirs[0]), spec.title, output)
    return written


def experiment_cost(options: Dict[str, str]) -> float:
    """A run's nominal cost (experiments/sharding.py), which the shards balance."""
    train, test = SPLIT_SIZES.get(options["dataset_name"], EMBEDDED_SPLIT_SIZES)
    return sharding.nominal_cost(options["model_name"], int(options["input_size"]), options["train_type"],
                                 int(options["num_epochs"]), train, test,
                                 float(options["rho"]) if "rho" in options else None, options.get("rho_mode", "exact"))


def figure_runs(numbers: Sequence[str], ego: bool, config: Setting, quiet: bool = False
                ) -> Tuple[Dict[str, Experiment], List[Plot]]:
    """The runs (by the setting's run name) and plots of one or more figures, each run once."""
    experiments: Dict[str, Experiment] = {}
    plots: List[Plot] = []
    for number in dict.fromkeys(numbers):
        figure_experiments, figure_plots, notes = selected(FIGURES[number], ego, config)
        if not quiet:
            print(f"Figure {number}{' (ego)' if ego else ''}, {config.name} setting: {FIGURES[number].description}")
            for note in notes:
                print(f"  note: {note}")
        for experiment in figure_experiments:
            experiments.setdefault(config.run_name(experiment), experiment)
        plots += [plot for plot in figure_plots if plot not in plots]
    return experiments, plots


def run_figures(numbers: Sequence[str], ego: bool, proxy: bool, logdir: Optional[str], dry_run: bool,
                device: str = "", options: Optional[argparse.Namespace] = None) -> int:
    """Train the missing runs of one or more figures (each run once; this shard's share) and draw
    the figures whose runs have all finished."""
    options = options or parse_args(["run", *numbers])
    shard = distribution(options)
    config = setting(proxy, logdir, device)
    if "16" in numbers and not device:
        print("note: Fig. 16 repeats Fig. 15's runs on a Raspberry Pi; on a machine that ran Fig. 15 "
              "they are reused. --device NAME keeps one device's runs and figures apart")
    experiments, plots = figure_runs(numbers, ego, config)
    jobs = [(experiment, config.options(experiment), config.flags(experiment))
            for experiment in experiments.values()]
    for experiment, _, flags in jobs:  # a renamed flag fails here, not hours in
        check_main_arguments(config.run_name(experiment), flags)
    if shard:
        mine = set(sharding.select([job[1]["run_name"] for job in jobs],
                                   {job[1]["run_name"]: experiment_cost(job[1]) for job in jobs}, shard))
        print(f"shard {shard}: {len(mine)} of the {len(jobs)} runs")
        jobs = [job for job in jobs if job[1]["run_name"] in mine]
    todo = [job for job in jobs
            if not os.path.exists(os.path.join(ROOT, config.logdir, job[1]["run_name"], "summary.json"))]
    print(f"{len(jobs)} runs, {len(jobs) - len(todo)} finished, {len(todo)} to train; logs in {config.logdir}")
    problem = preflight([experiment for experiment, _, _ in todo], config)
    if problem and options.executor == "ray":  # the nodes, not this driver, need the data and weights
        print(f"note (the nodes need what this machine lacks): {problem}")
        problem = None
    if problem and not dry_run:
        raise UserError(problem)
    if problem:
        print(f"would stop: {problem}")
    log_root = os.path.join(ROOT, config.logdir)

    def keep(name: str, summary: Dict, seconds: float) -> None:
        sharding.record(log_root, shard, name, summary.get("ran_on", {}))

    if options.executor == "ray" and todo and not dry_run:  # each node profiles itself
        from experiments.ray_executor import train_all_ray
        train_all_ray([(config.run_name(e), flags) for e, _, flags in todo], log_root, options.address, keep,
                      {run["run_name"]: [["profiler.py", *profiler_flags(run)]] for _, run, _ in todo if "rho" in run},
                      files=sorted({PROTOCOLS[e.model_name]["weights"] for e, _, _ in todo} if config.name == "proxy"
                                   else ()),
                      device_kind=options.device_kind, remote_root=options.remote_root, root=ROOT)
        todo = []
    profiles = profile_runs([run for _, run, _ in todo], dry_run or bool(problem))
    estimates = []
    for _, run, _ in todo:
        if profiles.get(profile_key(run)):
            estimates.append(estimate_seconds(run, profiles[profile_key(run)], split_sizes(run["dataset_name"])))
    if len(estimates) == len(todo) and todo:
        print(f"estimated time: {sum(estimates) / 3600:.2f} h ({sum(estimates) / 60:.0f} min) for "
              f"{len(todo)} runs, from the profiles measured on this machine", flush=True)
    complete = bool(todo) and len(estimates) == len(todo)
    train_all([(config.run_name(e), flags) for e, _, flags in todo], log_root, dry_run, on_done=keep,
              estimates=estimates if complete else None)
    if dry_run:
        print("figures: " + ", ".join(f"figures/{plot.output}.png" for plot in plots))
        return 0
    for path in draw(plots, config):
        print(f"wrote {os.path.relpath(path, ROOT)}")
    return 0


def claims_table(proxy: bool, logdir: Optional[str], output: Optional[str] = None, device: str = "") -> int:
    """The claims table (experiments/study_table.py) of Fig. 17's finished runs in a setting (every
    scheme on one model and dataset: ResNet50 on CUB-200, or the proxy's), one seed each."""
    from experiments import study_table

    config = setting(proxy, logdir, device)
    groups: Dict[str, List[Dict]] = {}
    for experiment in selected(FIGURES["17ac"], False, config)[0]:  # one model, one dataset, every scheme
        path = os.path.join(ROOT, config.logdir, config.run_name(experiment), "summary.json")
        if os.path.exists(path):
            with open(path) as handle:
                name = experiment.train_type + (f"_rho{experiment.rho:g}_paper" if experiment.rho else "")
                groups.setdefault(name, [json.load(handle)])
    if "full_training" not in groups:
        raise UserError(f"no finished full-training run in {config.logdir}: run a figure first "
                        f"(e.g. python scripts/figures.py run 17ac{' --proxy' if proxy else ''})")
    rows, target = study_table.summarize_groups(groups)
    table = study_table.markdown(rows, target)
    log_root = os.path.join(ROOT, config.logdir)
    planned = [config.run_name(experiment) for experiment in selected(FIGURES["17ac"], False, config)[0]]
    finished = [name for name in planned if os.path.exists(os.path.join(log_root, name, "summary.json"))]
    manifests = sharding.load_manifests(log_root)
    _, shards = sharding.report(planned, finished, manifests)
    if shards:
        table += "\n\n" + shards
    note = study_table.provenance_note(groups)
    if note:
        table += "\n\n" + note
    print(table)
    study_table.write_runs_csv(groups, os.path.join(log_root, "runs.csv"))
    print(f"runs: {os.path.join(log_root, 'runs.csv')} (one row a run)")
    if output:
        atomic_write_text(output, f"Claims table of the {config.name} setting's runs (one seed; "
                                  f"python scripts/figures.py table{' --proxy' if proxy else ''})\n\n{table}")
        print(f"wrote {output}")
    return 0


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("action", choices=["run", "table", "list"],
                        help="run: train a figure's missing runs and draw it; table: claims table of "
                             "the finished runs; list: the figures")
    parser.add_argument("figures", nargs="*", metavar="FIGURE",
                        help=f"figures to run, one or more of {', '.join(FIGURES)} (run only; runs that "
                             f"several figures share train once)")
    parser.add_argument("--ego", action="store_true", help="ElasticTrainer's runs only (the original's _ego scripts)")
    parser.add_argument("--proxy", action="store_true",
                        help="the offline setting: the embedded dataset, the calibrated study protocol, "
                             f"{PROXY_EPOCHS} epochs (models with a cached source backbone only)")
    parser.add_argument("--device", default="", metavar="NAME",
                        help="name of this device (e.g. jetson, pi): its runs go to logs/figures/<setting>_NAME "
                             "and its figures get the prefix NAME_, so devices' results stay apart")
    parser.add_argument("--logdir", default=None, help="where the runs live (default logs/figures/<setting>[_<device>])")
    parser.add_argument("--output", default=None, help="table: also write it to this markdown file")
    add_distribution_flags(parser)
    parser.add_argument("--dry_run", action="store_true",
                        help="check every run's flags with main.py's parser and print the plan; train nothing")
    args = parser.parse_args(argv)
    if args.action == "run" and not args.figures:
        parser.error(f"run needs a figure: one or more of {', '.join(FIGURES)}")
    unknown = [figure for figure in args.figures if figure not in FIGURES]
    if unknown:
        parser.error(f"no figure {', '.join(unknown)}; the figures are {', '.join(FIGURES)}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.action == "list":
        for number, figure in FIGURES.items():
            print(f"{number:<6}{len(figure.experiments):>3} runs  {figure.description}")
        return 0
    if args.action == "table":
        return claims_table(args.proxy, args.logdir, args.output, args.device)
    if args.device and not re.fullmatch(r"[A-Za-z0-9_-]+", args.device):
        raise UserError(f"--device {args.device!r}: use letters, digits, - and _ only (it names folders)")
    return run_figures(args.figures, args.ego, args.proxy, args.logdir, args.dry_run, args.device, args)


if __name__ == "__main__":
    sys.exit(run_cli(main))
