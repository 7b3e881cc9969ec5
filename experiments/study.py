"""The paper-headline study on the embedded dataset: a proxy calibrated on the baselines alone,
then every scheme over several seeds, resumable, summarised as a claims table and figure.

    python scripts/study.py run calibration --model_name mobilenetv2    # baselines only
    python scripts/study.py run claims --model_name mobilenetv2         # hours on 2 cores
    python scripts/study.py table claims --model_name mobilenetv2       # table + figure
    python scripts/study.py run depth; python scripts/study.py table depth   # where accuracy lives
    python scripts/study.py run deadline --task parts                   # every scheme at a wall-clock deadline

Each finished run's summary is copied to results/study/<model>_<input>/<plan>/<run>.json (small,
kept in git); a run whose summary exists is never trained again, so an interrupted study resumes
where it stopped. TensorBoard logs go to logs/study/<model>_<input>/<plan>/<run>/.
"""
from __future__ import annotations

import argparse
import functools
import glob
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from elastic_trainer.command_line import HelpFormatter, UserError
from elastic_trainer.files import atomic_write_json, atomic_write_text, file_sha256
from experiments.runner import add_distribution_flags, distribution, one_batch_at_a_time, train_all
from experiments.sharding import load_manifests, nominal_cost, record, report, resolve_shard, select
from experiments.study_deadline import JUDGED_DRAWS as DEADLINE_DRAWS, TASKS as DEADLINE_TASKS
from experiments.study_imagenet import TASKS as IMAGENET_TASKS
from experiments.study_plans import (FRONTIER_COMPARED, JUDGEMENT_DRAWS, JUDGEMENT_SEEDS, PLANS, PROTOCOLS,
                                     REGIME_BLOCK_RANGES, TASKS, Run, plan_runs, profiler_arguments, plan_protocol,
                                     require_backbone, study_key, task_name, validation_flags)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def results_dir(model_name: str, plan: str) -> str:
    """results/study/<study key>_<input>/<plan> (the study key: see study_plans.PROTOCOLS)."""
    protocol = PROTOCOLS[model_name]
    return os.path.join(ROOT, "results", "study", f"{model_name}_{protocol['input_size']}", plan)


def logs_dir(model_name: str, plan: str) -> str:
    protocol = PROTOCOLS[model_name]
    return os.path.join(ROOT, "logs", "study", f"{model_name}_{protocol['input_size']}", plan)


REFERENCE_STEPS = 20  # full steps timed against the final selection's after each run (main.py's default: none)


def main_arguments(model_name: str, run: Run, logdir: str, plan: Optional[str] = None) -> List[str]:
    """The main.py flags of one run of the study's `plan` (its protocol: study_plans.plan_protocol)."""
    protocol = plan_protocol(model_name, plan)
    weights = run.weights or protocol["weights"]
    arguments = ["--model_name", protocol["model_name"], "--dataset_name", protocol["dataset_name"],
                 "--input_size", str(protocol["input_size"]), "--batch_size", str(protocol["batch_size"]),
                 "--learning_rate", str(run.learning_rate or protocol["learning_rate"]),
                 "--num_epochs", str(protocol["num_epochs"]), "--interval", str(protocol["interval"]),
                 "--weights", weights, "--bn_mode", run.bn_mode or protocol["bn_mode"],
                 "--train_type", run.train_type, "--seed", str(run.seed),
                 "--logdir", logdir, "--run_name", run.name, *validation_flags(protocol),
                 "--reference_steps", str(REFERENCE_STEPS)]  # the tables' live step ratio
    if protocol.get("test_every_epoch"):  # the shapes studies select on test: they need each epoch's
        arguments += ["--test_every_epoch", "true"]
    if run.rho is not None:
        arguments += ["--rho", str(run.rho), "--rho_mode", run.rho_mode]
    if run.gradient_filter:
        arguments += ["--gf_radius", str(run.gradient_filter[0]), "--gf_blocks", str(run.gradient_filter[1])]
    if run.block_range:
        arguments += ["--block_range", run.block_range]
    return arguments


def check_one_backbone(out_dir: str, sha256: str, weights: str) -> None:
    """UserError when results already in `out_dir` were fine-tuned from another source backbone (or
    before backbones were recorded): a backbone trained again by other code differs, and a table over
    two of them would compare runs that did not start from the same weights."""
    other, unrecorded = [], []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        with open(path) as handle:
            summary = json.load(handle)
        if f"--weights {weights}" not in summary.get("command", ""):
            continue  # not fine-tuned from the protocol's backbone (from scratch)
        recorded = summary.get("backbone_sha256")
        if recorded != sha256:
            (other if recorded else unrecorded).append(os.path.basename(path))
    if other or unrecorded:
        folder = os.path.relpath(out_dir, ROOT)
        found = "; ".join(part for part in (
            f"{len(other)} made from another backbone (e.g. {other[0]})" if other else "",
            f"{len(unrecorded)} made before backbones were recorded (e.g. {unrecorded[0]})" if unrecorded else "")
            if part)
        raise UserError(f"{folder} holds results not made from this {weights} (sha256 {sha256[:12]}...): {found}. "
                        f"A backbone made again by other code differs, so a table over both would mix starting points. Move "
                        f"them aside (mv {folder} {folder}_earlier_backbone) to start the plan afresh, or bring "
                        f"back the backbone they were made from")


PROTOCOL_FLAGS = ("--dataset_name", "--input_size", "--batch_size", "--num_epochs", "--interval")


def protocol_of(arguments: Sequence[str]) -> Dict[str, str]:
    """The settings of a run's main.py flags that every run of a plan shares: the task, the
    input, the batch, the schedule and the validation split ("fresh", "carved F" or "none"; a
    command without --val_fraction predates it and had none)."""
    values = dict(zip(arguments, list(arguments[1:]) + [""]))
    settings = {flag: values.get(flag, "") for flag in PROTOCOL_FLAGS}
    carved = float(values.get("--val_fraction") or 0)
    chosen = values.get("--validation") or "auto"  # before --validation: carved when the fraction was above 0
    settings["validation"] = (chosen if chosen in ("fresh", "none") else f"carved {carved:g}" if carved > 0 else "none")
    return settings


def check_one_protocol(out_dir: str, model_name: str, plan: Optional[str] = None) -> None:
    """UserError when results already in `out_dir` were made under another protocol (e.g. a
    validation split carved from the training images where the protocol now has the dataset's
    own): their table would compare runs that trained and selected on different data."""
    current = protocol_of(main_arguments(model_name, Run("full_training", 0), "logs", plan))
    for path in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        with open(path) as handle:
            command = json.load(handle).get("command", "")
        if not command:
            continue
        saved = protocol_of(shlex.split(command))
        differences = [f"{flag} {saved[flag] or '-'} (now {current[flag]})" for flag in current
                       if saved[flag] != current[flag]]
        if differences:
            folder = os.path.relpath(out_dir, ROOT)
            raise UserError(f"{folder} holds results made under another protocol ({os.path.basename(path)}: "
                            f"{', '.join(differences)}); a table over both would compare runs trained or selected "
                            f"on different data. Move them aside (mv {folder} {folder}_earlier_protocol) to start "
                            f"the plan afresh")


FAMILY_SEEDS = 3  # the frontier's family runs at least this many seeds before its decisive rows run more
DECISIVE_FILE = "decisive_configs.txt"  # beside a frontier plan's results, once --decisive chose them


def decisive_runs(plan: str, runs: Sequence[Run], out_dir: str, dry_run: bool = False,
                  task: Optional[str] = None) -> List[Run]:
    """The runs of the frontier plan that decide its judgement (each compared scheme and the
    frontier member at its measured step ratio, from the results in `out_dir`), for more seeds.
    Chosen once and frozen beside the results, except in a dry run (which shows the choice)."""
    from experiments.study_frontier import decisive_configs, family_seeds
    from experiments.study_table import load_results

    if plan != "frontier":
        raise UserError(f"--decisive goes with the frontier plan, not {plan}")
    frozen = os.path.join(out_dir, DECISIVE_FILE)
    if os.path.exists(frozen):  # chosen once: every later call (and every shard) runs the same configs
        with open(frozen) as handle:
            chosen = set(handle.read().split())
    elif task in JUDGEMENT_DRAWS:  # the judging draws: the members placed at the selector's 5-seed ratio
        chosen = placed_members(out_dir)
        if not dry_run:
            atomic_write_text(frozen, "\n".join(sorted(chosen)) + "\n")
    else:
        groups = load_results(out_dir) if os.path.isdir(out_dir) else {}
        seeds = family_seeds(groups)
        ran = {run.get("seed") for group in groups.values() for run in group}  # by any config
        lacking = sorted({run.config_name for run in runs} - {name for name, group in groups.items()
                                                               if ran <= {r.get("seed") for r in group}})
        if len(seeds) < FAMILY_SEEDS or lacking:
            raise UserError(f"--decisive needs the frontier plan's results first, every config on the same "
                            f"{FAMILY_SEEDS} seeds or more (in {os.path.relpath(out_dir, ROOT)}: "
                            + (f"{len(lacking)} configs lack some of seeds {sorted(ran)}, e.g. {lacking[0]}"
                               if lacking and len(seeds) >= FAMILY_SEEDS - 1 else
                               f"the seeds all configs share: {sorted(seeds) or 'none'}")
                            + "): run the plan without --decisive")
        chosen = set(decisive_configs(groups))
        if not dry_run:
            atomic_write_text(frozen, "\n".join(sorted(chosen)) + "\n")
    where = "a dry run: not frozen yet" if not os.path.exists(frozen) else os.path.relpath(frozen, ROOT)
    print(f"decisive configs ({where}): {', '.join(sorted(chosen))}")
    return [run for run in runs if run.config_name in chosen]


def placed_members(out_dir: str) -> set:
    """The judging rule's frontier members on a draw (docs/benchmarks/selector.md, "The judgements"):
    each placed at the selector's own mean step ratio over its five judging seeds (the judgement plan's
    folder beside `out_dir`), ranked on the family's seeds 0-2; UserError until both have run."""
    from experiments.study_frontier import family_seeds
    from experiments.study_judgement import SELECTOR, budget_names, placements
    from experiments.study_table import load_results

    judged_dir = os.path.join(os.path.dirname(out_dir), "judgement")
    family = load_results(out_dir) if os.path.isdir(out_dir) else {}
    judged = load_results(judged_dir) if os.path.isdir(judged_dir) else {}
    lacking = [budget for budget in budget_names() if not set(JUDGEMENT_SEEDS) <= {
        run.get("seed") for run in judged.get(f"{SELECTOR}_{budget}", [])}]
    if lacking or len(family_seeds(family)) < FAMILY_SEEDS:
        raise UserError(f"--decisive on this draw places the frontier members at {SELECTOR}'s step ratio over its "
                        f"seeds {', '.join(map(str, JUDGEMENT_SEEDS))}: first run the judgement plan with --seeds "
                        f"{' '.join(map(str, JUDGEMENT_SEEDS))} and the frontier plan (seeds 0-2)"
                        + (f"; the selector lacks seeds at {', '.join(lacking)}" if lacking else ""))
    return {member["config"] for member in placements(family, judged).values() if member}


def run_costs(model_name: str, runs: Sequence[Run]) -> Dict[str, float]:
    """Each run's nominal cost (experiments/sharding.py): what the shards balance."""
    protocol = PROTOCOLS[model_name]
    return {run.name: nominal_cost(protocol["model_name"], protocol["input_size"], run.train_type,
                                   protocol["num_epochs"], 1, 1, run.rho, run.rho_mode) for run in runs}


def run_study(plan: str, model_name: str, seeds: Sequence[int], dry_run: bool,
              options: Optional[argparse.Namespace] = None) -> int:
    """Train every run of the plan (of this shard) that has no result yet; print progress and an
    estimate. `options`: the distribution flags (--shard, --executor ...; default local, all)."""
    options = options or parse_args(["run", plan])
    shard = distribution(options)
    runs = plan_runs(plan, model_name, seeds)
    out_dir, log_root = results_dir(model_name, plan), logs_dir(model_name, plan)
    if getattr(options, "decisive", False):
        runs = decisive_runs(plan, runs, out_dir, dry_run, task_name(model_name))
    python = sys.executable
    mine = set(select([run.name for run in runs], run_costs(model_name, runs), shard,
                      {run.name: f"seed {run.seed}" for run in runs} if options.shard_by == "seed" else None))
    if shard:
        print(f"shard {shard}: {len(mine)} of the plan's {len(runs)} runs")
        runs = [run for run in runs if run.name in mine]
    todo = [run for run in runs if not os.path.exists(os.path.join(out_dir, run.name + ".json"))]
    print(f"study {plan} for {model_name}: {len(runs)} runs, {len(runs) - len(todo)} done, "
          f"{len(todo)} to go; results in {os.path.relpath(out_dir, ROOT)}")
    backbone_sha256 = None
    if todo:  # a dry run too: it shows what the run would refuse
        check_one_protocol(out_dir, model_name, plan)
    if any(not run.weights for run in todo) and not dry_run:
        backbone_sha256 = file_sha256(require_backbone(model_name, "the study"))
        check_one_backbone(out_dir, backbone_sha256, PROTOCOLS[model_name]["weights"])

    def profile_of(run: Run) -> Tuple[str, Tuple[int, int]]:
        return run.bn_mode or PROTOCOLS[model_name]["bn_mode"], run.gradient_filter or (0, 0)

    def profiler_flags(key: Tuple[str, Tuple[int, int]]) -> List[str]:
        return profiler_arguments(model_name, key[0], key[1] if key[1][0] else None)

    profiles = {profile_of(run) for run in todo if run.rho is not None}
    # with ray, the node that trains a run measures its own profile first
    prepare = {run.name: [["profiler.py", *profiler_flags(profile_of(run))]] for run in todo if run.rho is not None}
    for key in sorted(profiles) if options.executor == "local" else ():
        command = [python, os.path.join(ROOT, "profiler.py")] + profiler_flags(key)
        print("profile:", " ".join(command[1:]))
        if not dry_run and subprocess.run(command, cwd=ROOT).returncode != 0:
            raise UserError(f"profiling failed: {' '.join(command[1:])} (its message is above)")
    jobs = [(run.name, main_arguments(model_name, run, log_root, plan)) for run in todo]

    def keep(name: str, summary: Dict, seconds: float) -> None:
        run = next(run for run in todo if run.name == name)
        summary["command"] = "python main.py " + " ".join(main_arguments(model_name, run, "logs/study/...", plan))
        summary["runner_seconds"] = seconds  # the subprocess, as the runner timed it
        if shard:
            summary["shard"] = str(shard)
        if not run.weights:
            summary["backbone_sha256"] = backbone_sha256
        atomic_write_json(os.path.join(out_dir, name + ".json"), summary)
        record(out_dir, shard, name, summary.get("ran_on", {}))

    if options.executor == "ray" and jobs and not dry_run:
        from experiments.ray_executor import train_all_ray
        weights = PROTOCOLS[model_name]["weights"]
        train_all_ray(jobs, log_root, options.address, keep, prepare,
                      files=[weights] if any(not run.weights for run in todo) else [],
                      device_kind=options.device_kind, remote_root=options.remote_root, root=ROOT)
        return 0
    train_all(jobs, log_root, dry_run, on_done=keep)
    return 0


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("action", choices=["run", "table"],
                        help="run: train the runs that have no result yet; table: summarise results")
    candidates = [scheme for scheme in dict.fromkeys(scheme for scheme, _, _ in FRONTIER_COMPARED)
                  if scheme != "elastic_training"]
    parser.add_argument("plan", choices=sorted([*PLANS, "deadline", "imagenet"]),
                        help="calibration: the baselines under candidate protocols (chooses the proxy); "
                             "regime: the baselines that decide whether a task is in the paper's regime; "
                             "headline: every scheme of the headline table, seed by seed; "
                             "claims: every scheme under the chosen protocol; depth: each stage of the "
                             "network trained alone, deeper static tops and the headline again, on one "
                             "backbone (mobilenetv2); frontier: a family of fixed choices (contiguous tops, "
                             "stages and adjacent pairs of stages alone, BN+bias, TL, full), ElasticTrainer and the "
                             f"candidates {', '.join(candidates)}, whose table sets each selective run beside "
                             "the best fixed choice within its measured step ratio; judgement: issue 54's "
                             "judging runs on its draws (full training, ElasticTrainer and gain_stage_training at "
                             "\"50 %%\" and 0.7, together, seed by seed; --seeds 0 1 2 3 4); deadline: issue 64's "
                             "schemes with --time_budget (design draws parts and shapes: 0.4, 0.6 and 0.8 of full "
                             "training's 12-epoch time, 3 seeds; fresh draws parts_seed7 and shapes_seed5: the "
                             "judgement, 5 seeds; results/deadline_64/, docs/deadline.md); imagenet: issue 74's "
                             "EfficientNet-Lite0 study (--task imagenet64, source64 or imagenet128: a group's "
                             "calibration screen; --task <group>_<draw>: equal epochs, then deadlines; table "
                             "imagenet --task verdict: every cell in one table; results/imagenet_regime/, "
                             "docs/benchmarks/imagenet_regime.md)")
    parser.add_argument("--model_name", default="mobilenetv2", choices=sorted({p["model_name"] for p in PROTOCOLS.values()}))
    parser.add_argument("--task", default=None, choices=TASKS + tuple(DEADLINE_DRAWS) + IMAGENET_TASKS,
                        help="shapes: embedded_shapes (an input-level shift: new textures and colours); "
                             "parts: embedded_parts (a label-space shift: new arrangements of known parts, "
                             "the paper's regime); parts_seed1 to parts_seed6, shapes_seed1 to shapes_seed3: the "
                             "same tasks' classes drawn from other task seeds (the same protocol and backbone); results go "
                             "to results/study/[<task>_]<model>_<input>/; parts_seed7, shapes_seed5: the deadline "
                             "plan's fresh draws (default shapes; the deadline plan needs it named); imagenet64, "
                             "source64, imagenet128, <group>_<draw> and verdict (a table): the imagenet plan's")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="seeds of the plan's runs (default 0 1 2; the deadline plan's are fixed by its rule)")
    parser.add_argument("--dry_run", action="store_true", help="print the commands, train nothing")
    parser.add_argument("--decisive", action="store_true",
                        help="run frontier: only the rows that decide its judgement, each compared scheme and the "
                             "frontier member at its measured step ratio (from the results so far), e.g. for "
                             "--seeds 3 4 after the plan ran seeds 0-2")
    add_distribution_flags(parser, by_seed=True)
    parser.add_argument("--output", default=None,
                        help="table: markdown file to write (default: results/study/<model>_<input>/"
                             "<plan>.md, kept in git with a copy of the figure and the runs' runs.csv; with "
                             "--output those stay as they are, and the runs' CSV goes beside it as "
                             "<name>_runs.csv). The figure itself goes to figures/study_<plan>_<model>.png and .pdf")
    return parser.parse_args(argv)


def depth_appendix(model_name: str, figure_path: str, groups: Dict[str, List[Dict]], rows: List[Dict]) -> str:
    """The depth plan's reading below its table (and its accuracy-by-depth figure)."""
    from experiments.study_depth import depth_section
    return depth_section(rows, model_name, figure_path)


def regime_appendix(model_name: str, groups: Dict[str, List[Dict]], rows: List[Dict]) -> str:
    """The regime plan's verdict below its table, printed too."""
    from experiments.study_regime import regime_section
    section = regime_section(groups, *REGIME_BLOCK_RANGES[PROTOCOLS[model_name]["model_name"]])
    print(section)
    return section


def frontier_appendix(model_name: str, groups: Dict[str, List[Dict]], rows: List[Dict]) -> str:
    """The frontier plan's reading below its table, then what each compared scheme's selections
    held stage by stage (from the runs' logs, where this machine has them); printed too."""
    from experiments.study_frontier import CANDIDATE, COMPARED_PREFIXES, frontier_section, judgement_section
    from experiments.study_plans import JUDGED
    section = frontier_section(groups)
    judged = judgement_section(groups, JUDGED.get(task_name(model_name), CANDIDATE))
    section += ("\n" + judged) if judged else ""
    compared = {name: runs for name, runs in groups.items() if name.startswith(COMPARED_PREFIXES)}
    section += selections_appendix(model_name, "frontier", compared, groups)
    print(section)
    return section


def judgement_appendix(model_name: str, groups: Dict[str, List[Dict]], rows: List[Dict]) -> str:
    """The judging rule read on a draw, below the judgement plan's table: its runs against the frontier
    plan's family on the same draw (experiments/study_judgement.py); printed too."""
    from experiments.study_judgement import judgement_section
    from experiments.study_table import load_results
    frontier_dir = results_dir(model_name, "frontier")
    section = judgement_section(load_results(frontier_dir) if os.path.isdir(frontier_dir) else {}, groups)
    print(section)
    return section


def selections_appendix(model_name: str, plan: str, groups: Dict[str, List[Dict]],
                        family: Optional[Dict[str, List[Dict]]] = None) -> str:
    """Per compared config, the share of each resolution stage its selections trained, selection
    by selection (experiments/study_selection.py), read from logs/study/.../<plan>/<run>/; with the
    plan's `family` first, what each stage gains trained alone."""
    from experiments.plot import Run as LoggedRun
    from experiments.study_plans import depth_stages
    from experiments.study_selection import selection_section, stage_gains_section

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # its "No path found after ..." chatter

    stages = depth_stages(PROTOCOLS[model_name]["model_name"])
    labels = [f"blocks {first}-{stop}" for first, stop in stages]
    parts, missing = [], runs_without_logs(model_name, plan, groups)
    if family:
        parts.append(stage_gains_section(family, stages, labels))
    for name, runs in sorted(groups.items()):
        logged = []
        for run in runs:
            run_dir = os.path.join(logs_dir(model_name, plan), run["run_name"])
            if run["run_name"] in missing:
                continue
            events = LoggedRun(run_dir)
            logged.append({"masks": events.masks(), "blocks": events.blocks(), "importance": events.importances()})
        if logged:
            parts.append(selection_section(name, logged, stages, labels))
    if missing:
        parts.append(f"(No logs here for {len(missing)} runs, e.g. {missing[0]}: their selections are left out.)\n")
    return ("\n" + "\n".join(parts)) if parts else ""


def runs_without_logs(model_name: str, plan: str, groups: Dict[str, List[Dict]]) -> List[str]:
    """The runs of `groups` whose log folder (logs/study/.../<plan>/<run>/) is not on this machine."""
    return [run["run_name"] for runs in groups.values() for run in runs
            if not os.path.isdir(os.path.join(logs_dir(model_name, plan), run["run_name"]))]


def check_selections_kept(model_name: str, directory: str) -> None:
    """UserError when rewriting the committed frontier table here would drop selection sections: the
    table reads each compared run's selections from its logs, which a clone without them lacks."""
    from experiments.study_frontier import COMPARED_PREFIXES
    from experiments.study_table import load_results

    table = directory + ".md"
    if not os.path.exists(table) or not os.path.isdir(directory):
        return
    compared = {name: runs for name, runs in load_results(directory).items() if name.startswith(COMPARED_PREFIXES)}
    missing = runs_without_logs(model_name, "frontier", compared)
    if missing:
        raise UserError(f"{len(missing)} runs of {table} have no logs here (e.g. {missing[0]}; they would be in "
                        f"{logs_dir(model_name, 'frontier')}), so rewriting it would drop their selection tables: "
                        f"pass --output FILE to write the table elsewhere, or run this where the logs are")


def batch_plan(args: argparse.Namespace) -> int:
    """The deadline and imagenet plans (experiments/study_deadline.py, study_imagenet.py): here, in one batch, on
    their rules' seeds. Their budgets are seconds measured on this machine, so their runs are not spread over others."""
    from experiments import study_deadline, study_imagenet
    plan, tasks, model = {"deadline": (study_deadline, DEADLINE_TASKS, "mobilenetv2"),
                          "imagenet": (study_imagenet, IMAGENET_TASKS, "efficientnet_lite0")}[args.plan]
    if args.task not in tasks:
        raise UserError(f"the {args.plan} plan runs on {', '.join(tasks)}, "
                        + (f"not {args.task}" if args.task else "named with --task"))
    if args.model_name != "mobilenetv2":
        raise UserError(f"the {args.plan} plan fine-tunes {model}, not {args.model_name}: drop --model_name")
    array_task = resolve_shard(None, os.environ)  # a SLURM array task would run the whole plan in each
    spread = [flag for flag, given in (
        ("--seeds", args.seeds is not None), ("--decisive", args.decisive), ("--shard", args.shard),
        ("--shard_by seed", args.shard_by != "run"), ("--executor ray", args.executor != "local"),
        ("--address, --device_kind or --remote_root", args.address or args.device_kind or args.remote_root),
        (f"shard (from {array_task.source if array_task else ''})", array_task)) if given]
    if spread:
        raise UserError(f"the {args.plan} plan takes no {', '.join(spread)}: its seeds are fixed by its rule "
                        "and its runs train here in one batch, because each budget is seconds measured on this machine")
    if args.plan == "imagenet" and args.task == study_imagenet.VERDICT:  # a table of every cell, not a plan
        if args.action == "run":
            raise UserError(f"{args.task} is a table of the cells' runs, not a plan: python scripts/study.py table "
                            f"imagenet --task {args.task}")
        from experiments.study_imagenet_verdict import verdict_table
        verdict_table(args.output)
    elif args.action == "run" and args.dry_run:
        plan.run_plan(args.task, True)
    elif args.action == "run":
        with one_batch_at_a_time(f"scripts/study.py run {args.plan} --task {args.task}"):
            plan.run_plan(args.task, False)
    else:
        plan.write_table(args.task, args.output)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.plan in ("deadline", "imagenet"):
        return batch_plan(args)
    if args.task in IMAGENET_TASKS:
        raise UserError(f"{args.task} is a task of the imagenet plan alone: python scripts/study.py {args.action} "
                        f"imagenet --task {args.task}")
    if args.task in DEADLINE_DRAWS:
        raise UserError(f"{args.task} is a fresh draw of the deadline plan alone (issue 64's judgement): "
                        f"python scripts/study.py run deadline --task {args.task}")
    args.seeds, args.task = args.seeds or [0, 1, 2], args.task or "shapes"
    args.model_name = study_key(args.task, args.model_name)
    if args.action == "run" and not args.dry_run and args.executor == "local":
        with one_batch_at_a_time(f"scripts/study.py run {args.plan} --task {args.task}"):
            return run_study(args.plan, args.model_name, args.seeds, False, args)
    if args.action == "run":
        return run_study(args.plan, args.model_name, args.seeds, args.dry_run, args)
    from experiments.study_table import write_table
    directory = results_dir(args.model_name, args.plan)
    figure = os.path.join(ROOT, "figures", f"study_{args.plan}_{args.model_name}.png")
    by_depth = os.path.splitext(figure)[0] + "_depth.png"
    appendix = {"depth": functools.partial(depth_appendix, args.model_name, by_depth),  # readings below the table
                "regime": functools.partial(regime_appendix, args.model_name),
                "frontier": functools.partial(frontier_appendix, args.model_name),
                "judgement": functools.partial(judgement_appendix, args.model_name)}.get(args.plan)
    if args.plan == "frontier" and not args.output:
        check_selections_kept(args.model_name, directory)
    planned = [run.name for run in plan_runs(args.plan, args.model_name, args.seeds)]
    finished = [os.path.basename(path)[:-5] for path in glob.glob(os.path.join(directory, "*.json"))]
    manifests = load_manifests(directory)
    _, shards = report(planned, finished, manifests)
    write_table(args.plan, args.model_name, directory, args.output or directory + ".md", figure, appendix,
                footer=shards if manifests else "",  # --output: the runs' CSV beside it, the committed one untouched
                runs_csv=os.path.splitext(args.output)[0] + "_runs.csv" if args.output else None)
    if shards and not manifests:
        print(shards)
    if not args.output:  # the copies kept in git go with the table kept in git; --output leaves both alone
        shutil.copyfile(figure, directory + ".png")
        if args.plan == "depth" and os.path.exists(by_depth):  # the accuracy-by-depth figure
            shutil.copyfile(by_depth, directory + "_by_depth.png")
    return 0

